"""The gates a session passes, as separate services sharing one registry.

One session, top-down (each module reads in the order the session meets it):

1. `session.registry` registers it; every later state change goes through
   the registry (persist, then announce).
2. `contract.ContractGate` — gate 1: start, draft, baseline, revise,
   confirm. Confirmation calls `RunLoop.start`.
3. `run_loop.RunLoop` — the engine works; the verifier re-runs the checks;
   failing checks go back for repair rounds. Green calls
   `ApprovalGate.present_diff` (or `present_finding` when nothing changed).
4. `verifier.Verifier` — the one place that runs checks (baseline, the
   worktree, an approved part). It snapshots the worktree into a git tree
   before and after the checks; only a tree that held still becomes the
   session's verified tree, which the diff, partial approval and delivery
   read, and it watches for later changes ("changed since verification").
5. `approval.ApprovalGate` — gate 2: approve whole or part, deliver, reject,
   re-verify; and cancel, from any state.

`recovery.Recovery` puts stored sessions back at their gate after a restart.
Each service receives what it uses in its constructor; none reaches into
another's private methods, and data flows down this list only.
"""
