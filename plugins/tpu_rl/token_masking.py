"""The Hugging Face token registered with Airflow's secrets masker in each process that can print
it, and the pieces a line wrap leaves of it masked in the text the run relays.

Airflow's masker (airflow.sdk.log.mask_secret) masks each registered value whole, in every log
line of the process and, from a task or a trigger, of its supervisor. It gets the token with and
without its `hf_` prefix. A token cut by a line wrap is two values it never saw, but registering
every piece with it would not do: SecretsMasker.add_mask joins its patterns from a set into one
alternation (`re.compile("|".join(self.patterns))`, airflow/sdk/_shared/secrets_masker), tried
in no set order, so an 8-character prefix may match first and leave the rest of a longer piece
in view; and each of the process's log lines would be tried against some eighty more patterns.
So the pieces are masked here, longest first, by `mask_token_pieces`: `redact` (pods' log
lines) and the notices' reason (tpu_rl.report.failures) go through it, which is all the text the
run relays from pods and exceptions. A piece under MIN_PIECE characters is
left: too short to be worth anything, and common enough to mask unrelated text.

An error's text may carry other credentials than the ones registered (an HTTP library's error
quotes the header or URL it refused); `mask_credentials` masks those too, by their shape.
"""

from __future__ import annotations

import re

HF_PREFIX = "hf_"
MIN_PIECE = 8
MASK = "***"
_pieces: set[str] = set()
_pattern: re.Pattern[str] | None = None
# Where a credential shows in an error's text, group 1 kept and the rest masked: an Authorization
# header's credentials (RFC 9110 section 11.6.2: `Authorization: <scheme> <credentials>`, the
# Bearer scheme of RFC 6750 section 2.1), a URL's password (RFC 3986 section 3.2.1:
# `//user:password@host`), a query parameter carrying a token, key or signature (OAuth's
# access_token, RFC 6750 section 2.3; Google's `key`, a signed URL's X-Goog-Signature), and a
# Hugging Face token, `hf_` and letters (https://huggingface.co/docs/hub/security-tokens;
# requiring a capital keeps setting names such as hf_revision in view).
CREDENTIAL_PATTERNS = (
    re.compile(r"(\b[Bb]earer\s+)[^\s'\",;]+"),
    re.compile(r"(\bAuthorization['\"]?\s*[:=]\s*['\"]?)[^'\"\r\n,}]+", re.IGNORECASE),
    re.compile(r"(://[^/\s:@]+:)[^/\s@]+(?=@)"),
    re.compile(
        r"([?&](?:access_token|token|key|sig|signature|x-goog-signature)=)[^&\s'\"]+",
        re.IGNORECASE,
    ),
    re.compile(r"()\bhf_(?=[A-Za-z0-9]*[A-Z])[A-Za-z0-9]{8,}"),
)
# What looks like a credential in a pod's log line (redact): a key named like one and its value,
# a Bearer header, a Hugging Face token, a Google OAuth access token (ya29.).
_LOG_SECRET = re.compile(
    r"(?i)(?P<key>[\w.-]*(?:token|secret|password|passwd|api[_-]?key|credential)[\w.-]*"
    r"[\"']?\s*[=:]\s*[\"']?)(?P<value>[^\s,\"'}]+)"
    r"|Bearer\s+\S+|\bhf_[A-Za-z0-9]{8,}|\bya29\.[\w.-]+"
)


def token_forms(token: str) -> list[str]:
    """The token as a log may print it whole: as it is, and without its `hf_` prefix."""
    body = token.removeprefix(HF_PREFIX)
    return [token, body] if body != token and len(body) >= MIN_PIECE else [token]


def wrap_pieces(token: str) -> set[str]:
    """What a line wrap can leave of the token on either line: each form's prefixes and
    suffixes of MIN_PIECE characters or more (the whole forms among them)."""
    return {
        piece
        for form in token_forms(token)
        for size in range(MIN_PIECE, len(form) + 1)
        for piece in (form[:size], form[-size:])
    }


def mask_token_pieces(text: str) -> str:
    """`text` with every registered token's pieces masked, the longest piece first."""
    return _pattern.sub(MASK, text) if _pattern else text


def mask_credentials(text: str) -> str:
    """`text` (an error's, an answer's) with every registered token's pieces masked, and
    whatever has the shape of a credential (CREDENTIAL_PATTERNS)."""
    text = mask_token_pieces(text)
    for pattern in CREDENTIAL_PATTERNS:
        text = pattern.sub(lambda match: match.group(1) + MASK, text)
    return text


def redact_secrets(text: str) -> str:
    """`text` through Airflow's masker (whatever this process registered), then without the
    token's wrapped pieces.

    The masker's `redact` where Airflow exports it, the one airflow.sdk.log imports
    (airflow/sdk/log.py:39; airflow/sdk/execution_time/secrets_masker.py names this module)."""
    from airflow.sdk._shared.secrets_masker import redact as airflow_redact

    return mask_token_pieces(str(airflow_redact(text)))


def redact(text: str) -> str:
    """Mask values that look like credentials (tokens, keys, passwords) in log text, every
    secret registered with Airflow's secrets masker (a token of any shape), and the pieces a
    line wrap left of the Hugging Face token."""

    def _mask(match: re.Match[str]) -> str:
        if match.group("key"):
            return f"{match.group('key')}***"
        return "***"

    return redact_secrets(_LOG_SECRET.sub(_mask, text))


def register_token(token: str) -> None:
    """Registers the token's whole forms with Airflow's masker and its pieces here: the token
    without the whitespace around it (the newline a file leaves), the part any text shows."""
    global _pattern
    from airflow.sdk.log import mask_secret

    token = token.strip()
    for form in token_forms(token):
        mask_secret(form)
    if new := wrap_pieces(token) - _pieces:
        _pieces.update(new)
        longest_first = sorted(_pieces, key=len, reverse=True)
        _pattern = re.compile("|".join(map(re.escape, longest_first)))


async def aregister_token(token: str) -> None:
    """register_token from a coroutine: in a thread, where mask_secret may tell the triggerer's
    supervisor over its comms (a blocking send from the event loop's thread fails on Airflow
    3.1.7: TriggerCommsDecoder.send runs async_to_sync, which refuses a running loop)."""
    from asgiref.sync import sync_to_async

    await sync_to_async(register_token)(token)


def register_hf_token(conn_id: str) -> None:
    """Reads the Hugging Face connection (tpu_rl.deployment.hf_conn_id) and registers its
    password. A connection this process
    cannot read is skipped quietly: the token cannot come from it here, and no caller (a
    failure callback, a Job's end) may fail for it."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception:  # AirflowNotFoundException, the secrets backend's or the API's own
        return
    if conn.password:
        register_token(conn.password)


async def aregister_hf_token(conn_id: str) -> None:
    """register_hf_token for a coroutine (a trigger's run): BaseHook.aget_connection, on Airflow
    3.1.7 as on 3.3 (airflow/sdk/bases/hook.py)."""
    from airflow.sdk import BaseHook

    try:
        conn = await BaseHook.aget_connection(conn_id)
    except Exception:  # as register_hf_token
        return
    if conn.password:
        await aregister_token(conn.password)
