"""The Celery driver: every step is its own task, so a run's branches spread over workers.

The order a message takes, one module each:

1. **start** (``run.run_start``, called by ``runs.services.run_enqueue``): the run goes
   to running and its first ready steps to ``queued`` in one transaction, under the
   run's row lock (``advance.advance_locked``); the step tasks are published when it
   commits (``broker.publish_step``, task ``runs.execute_step``).
2. **task** (``runs.tasks.execute_step`` → ``step.step_execute``): reads its step row,
   builds the run's context (``run.run_context``) and resolves the step's inputs.
3. **claim** (``claim.claim``): one conditional ``UPDATE … WHERE status='queued'``; a
   duplicate or late message loses it and does nothing.
4. **try** (``step._try`` → ``runs.engine.tries.try_once``): one try of the step, its
   lease renewed meanwhile when it runs long (``heartbeat``).
5. **settle** (``settle.settle``): ``runs.engine.tries.next_try`` decides. A retry goes
   back to ``queued`` with the try logged and the wait (``retry_in``, ``wait_reason``);
   the task publishes itself again with that countdown. Otherwise the outcome is
   written under the claim, locking the run row in the same statement.
6. **advance** (``advance.advance_after``, else ``advance.advance_locked``), in the
   settle's transaction: what the settled step made ready is queued and published on
   commit, or the run is finished (``runs.engine.finish``).
7. **publish or continue the chain** (``step.continue_chain``): a child that has no
   time limit of its own is kept for this same task instead of the broker; the only one
   made ready is claimed in the settle's transaction (``claim.claim_ready``), so a hop
   of a chain is one commit. Then steps 3 to 7 again for it.

Beside that walk:

- **sweep** (``sweep.steps_sweep``, Celery beat task ``runs.sweep_steps``): takes back
  steps whose lease ran out. A lost message is published again; a step of a dead
  worker is queued again (or failed for review when its tool is not idempotent).
- **child runs** (``children``): a `workflow` step parks on its child run
  (``runs.engine.kinds.workflow``); the child is started by ``runs.start_run``
  (``children.child_run_start``) and, when it ends, ``runs.settle_parent_step``
  (``children.parent_step_settle``) settles the parked step like step 5.

Routing and bounds: a step task goes to its tool's ``queue``, else its workflow's, else
the default queue (``broker.step_queue``); a chain continues in one task only while the
queue stays the same. A workflow's ``max_parallel`` caps the run's queued and running
steps when ``advance`` queues ready ones (docs/limits.md).

Leases: a running step's lease is ``FLOWPILOT_STEP_LEASE`` seconds, renewed every
third of it (from the first second of a try on) by ``heartbeat``; a queued step's
lease is its due time plus ``FLOWPILOT_QUEUED_LEASE``. Steps of in-process runs have
no lease and are never swept. A result written under an older claim (``claim_token``)
is ignored. The task names never change: messages in flight keep working across a
deploy.
"""
