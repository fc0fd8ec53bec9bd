"""A discussion saved before its events were typed still loads, replays and
saves back unchanged.

The record below is byte for byte what `Discussion.save()` wrote before the
discussion events got payload models (captured from a real run with the
scripted model: a read, a refused write, a prepared task, an answer), with
only its repository path replaced by `@REPO@`. The record holds the model
thread, the transcript and the prepared task, never events: a resume replays
events from the thread, so the replayed wire shape is pinned here too.
"""

from __future__ import annotations

import json
from pathlib import Path

from corral.supervisor.discuss import Discussions
from tests.fakes.scripted_llm import ScriptedProvider

DISCUSSION_ID = "disc-617733bef28e419583bda21e9526d922"

SAVED_RECORD = r"""{
 "version": 1,
 "discussion_id": "disc-617733bef28e419583bda21e9526d922",
 "repo": "@REPO@",
 "created_at": 1796158670.1716075,
 "updated_at": 1796158670.1774092,
 "turns": 1,
 "messages": [
  {
   "role": "user",
   "content": "what is in notes.txt? then add a flag"
  },
  {
   "role": "assistant",
   "content": "let me look",
   "tool_calls": [
    {
     "id": "l1",
     "name": "list_dir",
     "arguments": {
      "path": "."
     }
    },
    {
     "id": "r1",
     "name": "read_file",
     "arguments": {
      "path": "notes.txt"
     }
    }
   ]
  },
  {
   "role": "tool",
   "content": "notes.txt",
   "tool_call_id": "l1",
   "name": "list_dir"
  },
  {
   "role": "tool",
   "content": "     1\talpha",
   "tool_call_id": "r1",
   "name": "read_file"
  },
  {
   "role": "assistant",
   "content": "",
   "tool_calls": [
    {
     "id": "w1",
     "name": "write_file",
     "arguments": {
      "path": "x.txt",
      "content": "no"
     }
    }
   ]
  },
  {
   "role": "tool",
   "content": "This conversation stage is read-only; this is not a file-permission problem or a user refusing the requested change. Use prepare_coding_task with the requested change and constraints so the user can review it and start coding. Do not change file permissions or ask the user to do so.",
   "tool_call_id": "w1",
   "name": "write_file"
  },
  {
   "role": "assistant",
   "content": "",
   "tool_calls": [
    {
     "id": "p1",
     "name": "prepare_coding_task",
     "arguments": {
      "intent": "Add a --verbose flag",
      "constraints": [
       "keep the default quiet"
      ]
     }
    }
   ]
  },
  {
   "role": "tool",
   "content": "Prepared the task for the operator to review and edit. Nothing has started and no file changed; the operator decides whether to start coding.",
   "tool_call_id": "p1",
   "name": "prepare_coding_task"
  },
  {
   "role": "assistant",
   "content": "It says alpha. I prepared a task."
  }
 ],
 "transcript": [
  [
   "Operator",
   "what is in notes.txt? then add a flag"
  ],
  [
   "Assistant",
   "It says alpha. I prepared a task."
  ]
 ],
 "prepared_task": {
  "intent": "Add a --verbose flag",
  "constraints": [
   "keep the default quiet"
  ]
 }
}"""

REPLAYED = [
    {
        "text": "what is in notes.txt? then add a flag",
        "replayed": True,
        "type": "user_message",
        "seq": 0,
    },
    {"name": "list_dir", "args": {"path": "."}, "replayed": True, "type": "tool_call", "seq": 1},
    {
        "name": "read_file",
        "args": {"path": "notes.txt"},
        "replayed": True,
        "type": "tool_call",
        "seq": 2,
    },
    {"text": "let me look", "replayed": True, "type": "assistant_delta", "seq": 3},
    {
        "name": "write_file",
        "args": {"path": "x.txt", "content": "<2 chars>"},
        "replayed": True,
        "type": "tool_call",
        "seq": 4,
    },
    {
        "name": "prepare_coding_task",
        "args": {"intent": "Add a --verbose flag", "constraints": "['keep the default quiet']"},
        "replayed": True,
        "type": "tool_call",
        "seq": 5,
    },
    {
        "text": "It says alpha. I prepared a task.",
        "replayed": True,
        "type": "assistant_message",
        "seq": 6,
    },
    {
        "source": "saved",
        "replayed": True,
        "intent": "Add a --verbose flag",
        "constraints": ["keep the default quiet"],
        "type": "task_prepared",
        "seq": 7,
    },
]


def _write_record(state_dir: Path, repo: Path) -> Path:
    store = state_dir / "discussions"
    store.mkdir(parents=True)
    path = store / f"{DISCUSSION_ID}.json"
    path.write_text(SAVED_RECORD.replace("@REPO@", str(repo)), encoding="utf-8")
    return path


async def test_a_record_saved_in_the_first_format_resumes_and_replays(
    repo: Path, state_dir: Path
) -> None:
    path = _write_record(state_dir, repo.resolve())
    before = json.loads(path.read_text(encoding="utf-8"))
    mgr = Discussions(state_dir, ScriptedProvider([]))
    row = next(r for r in mgr.list() if r["discussion_id"] == DISCUSSION_ID)
    assert row["turns"] == 1 and row["prepared"] is True and "error" not in row

    disc = await mgr.resume(DISCUSSION_ID)
    replay = disc.events.events()
    wire = [e.to_dict() for e in replay]
    assert all(w.pop("discussion_id") == DISCUSSION_ID for w in wire)
    assert all(isinstance(w.pop("ts"), float) for w in wire)
    assert wire == REPLAYED
    assert disc.prepared_task is not None
    assert disc.prepared_task.intent == "Add a --verbose flag"
    assert disc.prepared_task.constraints == ["keep the default quiet"]
    assert disc.turns == 1 and len(disc.transcript) == 2

    await mgr.close(DISCUSSION_ID)  # saves it again
    assert json.loads(path.read_text(encoding="utf-8")) == before
