"""Checks a Meta request or a fake server's reply against the official SDKs' types.

usage: check.py KIND request|response < body.json
       check.py --serve   (one check per line: {"kind", "what", "body"} in, {"error"} out)
       check.py --serve-socket PATH   (the same on each connection to the unix socket PATH)
KIND: openai-responses, openai-chat or anthropic-messages. A request is validated
with pydantic's TypeAdapter over the SDK's non-streaming create params, and every key it carries
must be one the params' TypedDicts declare (TypeAdapter ignores unknown keys of a
TypedDict). A response is validated as the SDK's Response / ChatCompletion / Message model. Exit 0
when it conforms; otherwise 1 and the problems on stderr.
"""

import json
import sys
import typing

import pydantic
import typing_extensions


def types(kind):
    if kind == "openai-responses":
        from openai.types.responses import Response
        from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

        return ResponseCreateParamsNonStreaming, Response
    if kind == "openai-chat":
        from openai.types.chat import ChatCompletion
        from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
        return CompletionCreateParamsNonStreaming, ChatCompletion
    if kind == "anthropic-messages":
        from anthropic.types import Message
        from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

        return MessageCreateParamsNonStreaming, Message
    raise SystemExit(f"check.py: unknown kind {kind}")


def unwrap(tp):
    while True:
        origin = typing.get_origin(tp)
        if origin in (typing.Annotated, typing_extensions.Annotated):
            tp = typing.get_args(tp)[0]
        elif origin in (typing_extensions.Required, typing_extensions.NotRequired,
                        typing.Required, typing.NotRequired):
            tp = typing.get_args(tp)[0]
        else:
            return tp


def unknown_keys(value, tp, path):
    """The paths of keys in value that its TypedDict type does not declare."""
    tp = unwrap(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union:
        # The arm the value is: one pydantic accepts with no unknown keys.
        best = None
        for arm in args:
            try:
                pydantic.TypeAdapter(arm).validate_python(value)
            except Exception:
                continue
            found = unknown_keys(value, arm, path)
            if not found:
                return []
            best = found if best is None else best
        return best or []
    if typing_extensions.is_typeddict(tp):
        if not isinstance(value, dict):
            return []
        hints = typing_extensions.get_type_hints(tp, include_extras=True)
        found = [f"{path}.{k}" for k in value if k not in hints]
        for k, v in value.items():
            if k in hints:
                found += unknown_keys(v, hints[k], f"{path}.{k}")
        return found
    if origin is dict or origin is typing.Dict:
        return [] if len(args) < 2 else [
            p for k, v in (value.items() if isinstance(value, dict) else [])
            for p in unknown_keys(v, args[1], f"{path}.{k}")
        ]
    if args and isinstance(value, list) and origin is not tuple:
        return [p for i, v in enumerate(value) for p in unknown_keys(v, args[0], f"{path}[{i}]")]
    return []


def check(kind, what, body):
    """Raises when body does not conform."""
    params, model = types(kind)
    if what == "request":
        pydantic.TypeAdapter(params).validate_python(body, strict=False)
        extra = unknown_keys(body, params, "body")
        if extra:
            raise ValueError(f"keys the SDK's {params.__name__} does not know: {extra}")
    else:
        # The models keep unknown fields (extra=allow): list them.
        extra = [f"body.{k}" for k in (model.model_validate(body).model_extra or {})]
        if extra:
            raise ValueError(f"unknown fields: {extra}")


def answer(line):
    asked = json.loads(line)
    kind, what = asked["kind"], asked["what"]
    try:
        check(kind, what, json.loads(asked["body"]))
        error = None
    except Exception as e:
        error = f"{kind} {what} does not conform: {type(e).__name__}: {e}"
    return json.dumps({"error": error}) + "\n"


def serve():
    """Checks until stdin ends: a test checks many bodies, and importing the SDKs
    costs seconds, paid here once instead of once per body."""
    for line in sys.stdin:
        sys.stdout.write(answer(line))
        sys.stdout.flush()


def serve_socket(path):
    """Checks for every test process of a run (testdata/test.sh starts it): the SDKs
    imported once for the run, not once per test process."""
    import socketserver

    class Checks(socketserver.StreamRequestHandler):
        def handle(self):
            for line in self.rfile:
                self.wfile.write(answer(line).encode())
                self.wfile.flush()

    socketserver.ThreadingUnixStreamServer.daemon_threads = True
    with socketserver.ThreadingUnixStreamServer(path, Checks) as server:
        # Bound first, so that the run need not wait: a test's connection waits in
        # the backlog while the SDKs are imported.
        for kind in ("openai-responses", "openai-chat", "anthropic-messages"):
            try:
                types(kind)
            except ImportError:
                pass  # said on each check, with what to install
        server.serve_forever()


def main():
    if sys.argv[1:] == ["--serve"]:
        serve()
        return
    if sys.argv[1:2] == ["--serve-socket"] and len(sys.argv) == 3:
        serve_socket(sys.argv[2])
        return
    kind, what = sys.argv[1], sys.argv[2]
    body = json.load(sys.stdin)
    try:
        check(kind, what, body)
    except Exception as e:
        print(f"{kind} {what} does not conform: {e}", file=sys.stderr)
        sys.exit(1)


main()
