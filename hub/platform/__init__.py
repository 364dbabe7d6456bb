"""What every platform extension needs, and the API it lives on beside ``hub`` itself.

Splitting long text (:func:`split_message`; :func:`split_off_loop` for a costly measure), an outbound :class:`Governor` (pacing,
``retry_after``, retries), the one :class:`Backoff`, a :class:`TypingIndicator`, the
:func:`reply_target` lookup, a :class:`LoopGuard` for bot-to-bot exchanges,
:class:`AllowList`, the base of every platform's settings (:class:`PlatformSettings`) and
:func:`quiet_loggers` for a client library's chatter, :func:`check_secret_length` (a webhook
secret's rule: at least :data:`MIN_SECRET_LENGTH` characters), :func:`private_access`
(``dm_policy`` applied to a private message), :func:`send_pairing_code` (its code, once,
off the intake path) and :func:`admit_private` (both, with the log lines every platform writes), :class:`LiveMessage` (a reply edited in
place while the model writes it, for ``live = true``), :class:`LeaseKeeper` (a listener that must run on one worker
only runs while it holds the lease; get one from ``hub.lease(name)``), and for files :func:`fetch_url` (a
download capped at a size while it is read; with :class:`MediaHosts`, only from the platform's
media hosts at public addresses), :func:`read_capped` (a local file, capped), :func:`display_name`
and :func:`human_size`; for chat commands :func:`parse_command` (``/name args`` in a message's
text) and :class:`CommandInfo` (a command as ``hub.commands.menu(...)`` lists it); for
intake :class:`PoisonUpdates` (an update that fails every time is parked in the inbox, and
intake goes on); for voice :func:`speak` (a reply as OGG/Opus voice messages, when
``[voice]`` says this run's reply is spoken);
for approvals :class:`Approver` (how a platform asks a person, with its own
buttons, before an action runs: ``Extension(approver=...)``), the :class:`ApprovalRequest` it
shows and ``hub.approvals.answer(...)`` (an :class:`ApprovalDesk`), whose
:class:`ApprovalAnswer` it shows to whoever answered;
for public timelines :class:`PublicSettings`, :class:`ReviewQueue`,
:func:`reserve_posts`, :func:`admit_reply`, :func:`check_length`, and for a post naming
pictures that cannot go with it :class:`PictureAttributes`, :func:`picture_names` and
:func:`refuse_pictures` (hub/platform/_public.py), with :class:`PublicTimeline`, the runtime a
public timeline's bot is built on (governor, review queue, the reader's lease, the mention
guards, thread and picture checks, the review hand-off, the daily cap; hub/platform/_timeline.py).

The core never names a platform; extensions map their client's errors onto
:class:`RateLimited`, :class:`TransientSendError` and :class:`PermanentSendError` and send
through a :class:`Governor`, which honours ``retry_after``, spaces messages per chat and
globally, and gives up with :class:`SendFailed` after a bounded number of attempts, so a
send that finally fails is a failed output in the run's log, never reported as sent.
"""

from __future__ import annotations

from ..backoff import Backoff
from ..config import MIN_SECRET_LENGTH, check_secret_length
from ..definitions import ApprovalAnswer, ApprovalDesk, ApprovalRequest, Approver
from ..engine import CommandInfo
from ..logging_setup import quiet_loggers
from ..media import MediaHosts, Resolve, display_name, fetch_url, host_name, human_size, read_capped
from ..store import Lease, LeaseKeeper, Review
from ._access import admit_private, private_access, send_pairing_code
from ._audience import AllowList, LoopGuard
from ._commands import parse_command
from ._live_message import LiveMessage, LiveResult, balance_fences, live_drafts
from ._markers import marker, prune_markers
from ._poison import PoisonUpdates, is_transient
from ._public import (
    DAY,
    PictureAttributes,
    PublicSettings,
    ReviewQueue,
    admit_reply,
    check_length,
    picture_names,
    refuse_pictures,
    reserve_posts,
)
from ._reply import reply_target
from ._send import Governor, PermanentSendError, RateLimit, RateLimited, SendFailed, TransientSendError
from ._settings import DEFAULT_ACCOUNT, PlatformSettings, account_key, split_account_key
from ._shared import OutboundLimiter, RedisLimiter
from ._split import LONG_SPLIT, split_message, split_off_loop, utf16_len
from ._timeline import PublicTimeline, TimelineBot, norm_user, timeline_extension
from ._typing import TypingIndicator
from ._voice import DEFAULT_SPEECH_CHARS, AudioClip, speak

__all__ = [
    "speak",
    "AudioClip",
    "DEFAULT_SPEECH_CHARS",
    "ApprovalAnswer",
    "ApprovalDesk",
    "ApprovalRequest",
    "Approver",
    "OutboundLimiter",
    "RedisLimiter",
    "Backoff",
    "MIN_SECRET_LENGTH",
    "check_secret_length",
    "Lease",
    "LeaseKeeper",
    "split_message",
    "split_off_loop",
    "LONG_SPLIT",
    "utf16_len",
    "RateLimited",
    "TransientSendError",
    "PermanentSendError",
    "SendFailed",
    "Governor",
    "RateLimit",
    "LoopGuard",
    "AllowList",
    "TypingIndicator",
    "reply_target",
    "PlatformSettings",
    "DEFAULT_ACCOUNT",
    "account_key",
    "split_account_key",
    "PublicSettings",
    "Review",
    "ReviewQueue",
    "admit_reply",
    "check_length",
    "reserve_posts",
    "PictureAttributes",
    "picture_names",
    "refuse_pictures",
    "PublicTimeline",
    "TimelineBot",
    "timeline_extension",
    "norm_user",
    "DAY",
    "quiet_loggers",
    "admit_private",
    "marker",
    "prune_markers",
    "private_access",
    "send_pairing_code",
    "fetch_url",
    "read_capped",
    "MediaHosts",
    "Resolve",
    "host_name",
    "display_name",
    "human_size",
    "LiveMessage",
    "PoisonUpdates",
    "is_transient",
    "LiveResult",
    "balance_fences",
    "live_drafts",
    "parse_command",
    "CommandInfo",
]
