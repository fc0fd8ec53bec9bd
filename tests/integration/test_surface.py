"""The owner's surface is one definition (`control/surface.py`): every method
it lists is served, answers through the real socket as the type it names,
and every method a client may ask in-process answers the same attached.

A method added to one side only (a record without a handler, a facade method
the attached console lacks, an answer the client cannot read) fails here.
"""

from __future__ import annotations

import asyncio
import inspect
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from corral.supervisor.api import Supervisor
from corral.supervisor.control import protocol as p
from corral.supervisor.control.server import METHODS
from corral.supervisor.control.surface import CALLS, OwnerSurface
from corral.supervisor.errors import CorralError
from corral.supervisor.remote import AsyncControlClient, AttachedSupervisor, OwnerServices
from corral.supervisor.states import CoderState
from tests.conftest import SupervisorFactory, proposed

NOPE = "nope-0000000000000000000000"  # a session no owner knows

# What the walk passes for each parameter name (a record's field or a facade
# method's argument): the real session for reads, a missing one for changes.
SAMPLES: dict[str, Any] = {
    "text": "hello",
    "request": "make it smaller",
    "target": NOPE,
    "sender": "operator",
    "task_id": "task-nope",
    "engine": "custom:true",
    "name": "a name",
    "keys": ["Enter"],
    "width": 80,
    "height": 24,
    "lines": 10,
    "limit": 10,
    "stream": 987654,
    "discussion_id": "disc-nope",
    "run_id": "mcp-run-nope",
    "action": "start",
    "params": {"intent": "x"},
    "split": {"tasks": []},
    "remote": "origin",
    "states": ["contract_proposed"],  # what the session is at: wait_for answers at once
    "mode": "code",
    "model": "a-model",
    "key": "reasoning",
    "value": "high",
    "reason": "the tests contradict the intent",
}

# facade methods that change a session: walked on a session nobody has, so
# both sides answer the same refusal and nothing changes between the two calls
CHANGES = {
    "report_impossible",
    "approve",
    "reject",
    "cancel",
    "delete",
    "retry",
    "revive",
    "rename",
    "archive",
    "release",
    "push",
    "pull_request",
    "confirm",
    "revise",
    "respond",
    "steer",
    "set_mode",
    "set_model",
    "set_option",
    "set_foreman_split",
    "send_keys_to_agent",
    "agent_keys",
    "resize_agent",
    "agent_resize",
}

# not calls on the owner: taking hold and letting go, and the streams (one
# walked below through the socket, and in their own tests)
LIFECYCLE = {
    "open",
    "close",
    "opened",
    "state_dir",
    "broken_rows",
    "left_running",
    "subscribe",
    "unsubscribe",
    "watch",
    "unwatch",
}


@pytest.fixture
def short_state() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sf", dir="/tmp"))
    yield path / "state"
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def owner(make_supervisor: SupervisorFactory, short_state: Path) -> AsyncIterator[Supervisor]:
    sup = await make_supervisor(state=short_state)
    services = OwnerServices(sup, mcp_http=False)
    await services.start()
    yield sup
    await services.close()


def surface_methods() -> list[str]:
    return [
        name for name in dir(OwnerSurface) if not name.startswith("_") and name not in LIFECYCLE
    ]


def test_every_record_is_served_and_every_handler_has_a_record() -> None:
    assert list(METHODS) == list(CALLS)
    for name, call in CALLS.items():
        assert call.name == name
        assert METHODS[name].call is call
        assert issubclass(call.params, BaseModel)
        if call.person is not None:
            assert not call.agents, f"{name}: a person's method is not for agents"


@pytest.mark.parametrize("name", surface_methods())
def test_in_process_and_attached_take_the_same_arguments(name: str) -> None:
    """The facade and the attached console agree with the surface on each
    method's parameters, and on whether it is awaited."""
    wanted = inspect.signature(getattr(OwnerSurface, name))
    for side in (Supervisor, AttachedSupervisor):
        found = getattr(side, name, None)
        assert found is not None, f"{side.__name__} lacks {name}"
        assert inspect.iscoroutinefunction(found) == inspect.iscoroutinefunction(
            getattr(OwnerSurface, name)
        ), f"{side.__name__}.{name} is awaited differently"
        assert _shape(inspect.signature(found)) == _shape(wanted), f"{side.__name__}.{name}"


def _shape(signature: inspect.Signature) -> tuple[list[Any], set[Any]]:
    """Positional parameters in order; keyword-only ones in any order."""
    params = list(signature.parameters.values())
    keyword_only = {(q.name, q.default) for q in params if q.kind is q.KEYWORD_ONLY}
    return [
        (q.name, q.kind, q.default) for q in params if q.kind is not q.KEYWORD_ONLY
    ], keyword_only


def _params_for(call_name: str, sid: str) -> BaseModel:
    model = CALLS[call_name].params
    values: dict[str, Any] = {}
    for field, info in model.model_fields.items():
        if field == "session_id":
            values[field] = NOPE if call_name in CHANGES else sid
        elif field in SAMPLES:
            values[field] = SAMPLES[field]
        elif field == "repo":
            values[field] = "/nonexistent/repo"
        elif field == "intent":
            values[field] = "say hi"
        elif info.is_required():
            raise AssertionError(f"no sample for {call_name}.{field}: add one to SAMPLES")
    return model.model_validate(values)


async def test_every_record_answers_through_the_socket_as_its_type(owner, repo: Path) -> None:
    """Each method answers (read as the type its record names) or refuses
    with a sentence; none is unknown, mis-parametered or crashes."""
    sid = await proposed(owner, repo)
    client = await AsyncControlClient.connect(owner.state_dir)
    answered: list[str] = []
    try:
        for name, call in CALLS.items():
            try:
                await client.request(call, _params_for(name, sid))
            except p.ControlError as exc:
                pytest.fail(f"{name}: {exc.kind} ({exc.code}): {exc}")
            except CorralError:
                continue  # the supervisor's refusal: the method is there
            answered.append(name)
    finally:
        await client.close()
    for read in ("hello", "list", "get", "session_info", "engines", "history", "watch"):
        assert read in answered


def _args_for(name: str, sid: str, repo: Path) -> tuple[list[Any], dict[str, Any]]:
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for param in list(inspect.signature(getattr(OwnerSurface, name)).parameters.values())[1:]:
        if param.name == "session_id":
            value: Any = NOPE if name in CHANGES else sid
        elif param.name == "repo":
            value = str(repo / "missing")
        elif param.name == "intent":
            value = "say hi"
        elif param.name == "sockets":
            value = [repo / "no-tmux-socket"]
        elif param.name == "states":
            value = {CoderState.CONTRACT_PROPOSED}
        elif param.name in SAMPLES:
            value = SAMPLES[param.name]
        elif param.default is not inspect.Parameter.empty:
            continue
        else:
            raise AssertionError(f"no sample for {name}({param.name}): add one to SAMPLES")
        if param.kind is inspect.Parameter.KEYWORD_ONLY:
            kwargs[param.name] = value
        else:
            args.append(value)
    return args, kwargs


def _shown(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude={"updated_at"})
    if isinstance(value, list):
        return [_shown(v) for v in value]
    return value


async def _outcome(side: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    method = getattr(side, name)
    try:
        if inspect.iscoroutinefunction(method):
            return ("answer", _shown(await method(*args, **kwargs)))
        # the attached console's synchronous reads block: off this loop, which
        # the owner's server runs on too
        return ("answer", _shown(await asyncio.to_thread(method, *args, **kwargs)))
    except p.ControlError as exc:
        pytest.fail(f"{name}: {exc.kind} ({exc.code}): {exc}")
    except CorralError as exc:
        return ("refused", str(exc))


async def test_every_method_answers_the_same_in_process_and_attached(owner, repo: Path) -> None:
    """The console's calls give the same answer (or the same refusal) on the
    owner's own facade and on a console attached to it."""
    sid = await proposed(owner, repo)
    attached = AttachedSupervisor(owner.state_dir)
    await attached.open()
    try:
        for name in surface_methods():
            args, kwargs = _args_for(name, sid, repo)
            here = await _outcome(owner, name, args, kwargs)
            there = await _outcome(attached, name, args, kwargs)
            assert here == there, name
    finally:
        await attached.close()
