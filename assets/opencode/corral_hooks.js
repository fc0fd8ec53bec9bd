// corral's one-run OpenCode plugin (loaded through OPENCODE_CONFIG_CONTENT,
// never installed in the operator's config): it turns OpenCode's bus events
// into corral hook records, so the end of a turn and a permission wait are
// exact edges instead of guesses from the screen.
//
// Each edge runs `$CORRAL_HOOK_CMD <Name>` with a JSON payload on stdin; the
// names are the Claude Code hook names corral already maps to a status:
//   session.status busy        -> UserPromptSubmit (a turn is running)
//   permission.asked           -> PermissionRequest (tool_name = permission)
//   permission.replied (once|always) -> PostToolUse (running again)
//   session.error              -> StopFailure (an interrupt too: MessageAbortedError)
//   session.idle               -> Stop (the turn ended; once per turn)
// Sub-agent sessions (those with a parent) are skipped: their idle is not
// the end of the operator's turn. A failing hook never disturbs OpenCode.
import { spawn } from "node:child_process";

const subSessions = new Set();
const lastStatus = new Map();
const ended = new Set(); // sessions whose turn end was reported (an interrupt idles twice)

function edge(event) {
  const props = event.properties || {};
  switch (event.type) {
    case "session.created":
    case "session.updated":
      if (props.info && props.info.parentID) subSessions.add(props.info.id);
      return null;
    case "session.status": {
      const kind = props.status && props.status.type;
      const before = lastStatus.get(props.sessionID);
      lastStatus.set(props.sessionID, kind);
      if (kind === "busy") ended.delete(props.sessionID);
      return kind === "busy" && before !== "busy" ? "UserPromptSubmit" : null;
    }
    case "permission.asked":
      return "PermissionRequest";
    case "permission.replied":
      return props.reply === "reject" ? null : "PostToolUse";
    case "session.error":
      return "StopFailure";
    case "session.idle":
      lastStatus.set(props.sessionID, "idle");
      if (ended.has(props.sessionID)) return null;
      ended.add(props.sessionID);
      return "Stop";
    default:
      return null;
  }
}

function report(command, name, event) {
  const props = event.properties || {};
  const payload = {
    ...props,
    hook_event_name: name,
    opencode_event: event.type,
    session_id: props.sessionID,
  };
  if (name === "PermissionRequest") payload.tool_name = props.permission;
  try {
    const child = spawn("/bin/sh", ["-c", `${command} ${name}`], {
      stdio: ["pipe", "ignore", "ignore"],
    });
    child.on("error", () => {});
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  } catch {
    // the hook is best effort; the screen markers still work
  }
}

export const CorralHooks = async () => ({
  event: async ({ event }) => {
    const command = process.env.CORRAL_HOOK_CMD;
    if (!command || !event) return;
    const name = edge(event);
    const session = (event.properties || {}).sessionID;
    if (name && !subSessions.has(session)) report(command, name, event);
  },
});
