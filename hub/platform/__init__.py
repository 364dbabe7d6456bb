"""What every platform extension needs, and the API it lives on beside ``hub`` itself.

Splitting long text ([`split_message()`][hub.platform.split_message]; [`split_off_loop()`][hub.platform.split_off_loop] for a costly measure), an outbound [`Governor`][hub.platform.Governor] (pacing,
``retry_after``, retries), the one [`Backoff`][hub.platform.Backoff], a [`TypingIndicator`][hub.platform.TypingIndicator], the
[`reply_target()`][hub.platform.reply_target] lookup, a [`LoopGuard`][hub.platform.LoopGuard] for bot-to-bot exchanges,
[`AllowList`][hub.platform.AllowList], the base of every platform's settings ([`PlatformSettings`][hub.platform.PlatformSettings]) and
[`quiet_loggers()`][hub.platform.quiet_loggers] for a client library's chatter, [`check_secret_length()`][hub.platform.check_secret_length] (a webhook
secret's rule: at least [`MIN_SECRET_LENGTH`][hub.platform.MIN_SECRET_LENGTH] characters), [`private_access()`][hub.platform.private_access]
(``dm_policy`` applied to a private message), [`send_pairing_code()`][hub.platform.send_pairing_code] (its code, once,
off the intake path) and [`admit_private()`][hub.platform.admit_private] (both, with the log lines every platform writes), [`LiveMessage`][hub.platform.LiveMessage] (a reply edited in
place while the model writes it, for ``live = true``), [`LeaseKeeper`][hub.platform.LeaseKeeper] (a listener that must run on one worker
only runs while it holds the lease; get one from ``hub.lease(name)``), and for files [`fetch_url()`][hub.platform.fetch_url] (a
download capped at a size while it is read; with [`MediaHosts`][hub.platform.MediaHosts], only from the platform's
media hosts at public addresses), [`read_capped()`][hub.platform.read_capped] (a local file, capped), [`display_name()`][hub.platform.display_name]
and [`human_size()`][hub.platform.human_size]; for chat commands [`parse_command()`][hub.platform.parse_command] (``/name args`` in a message's
text) and [`CommandInfo`][hub.platform.CommandInfo] (a command as ``hub.commands.menu(...)`` lists it); for
intake [`PoisonUpdates`][hub.platform.PoisonUpdates] (an update that fails every time is parked in the inbox, and
intake goes on); for voice [`speak()`][hub.platform.speak] (a reply as OGG/Opus voice messages, when
``[voice]`` says this run's reply is spoken);
for approvals [`Approver`][hub.platform.Approver] (how a platform asks a person, with its own
buttons, before an action runs: ``Extension(approver=...)``), the [`ApprovalRequest`][hub.platform.ApprovalRequest] it
shows and ``hub.approvals.answer(...)`` (an [`ApprovalDesk`][hub.platform.ApprovalDesk]), whose
[`ApprovalAnswer`][hub.platform.ApprovalAnswer] it shows to whoever answered;
for public timelines [`PublicSettings`][hub.platform.PublicSettings], [`ReviewQueue`][hub.platform.ReviewQueue],
[`reserve_posts()`][hub.platform.reserve_posts], [`admit_reply()`][hub.platform.admit_reply], [`check_length()`][hub.platform.check_length], and for a post naming
pictures that cannot go with it [`PictureAttributes`][hub.platform.PictureAttributes], [`picture_names()`][hub.platform.picture_names] and
[`refuse_pictures()`][hub.platform.refuse_pictures] (hub/platform/_public.py), with [`PublicTimeline`][hub.platform.PublicTimeline], the runtime a
public timeline's bot is built on (governor, review queue, the reader's lease, the mention
guards, thread and picture checks, the review hand-off, the daily cap; hub/platform/_timeline.py).

The core never names a platform; extensions map their client's errors onto
[`RateLimited`][hub.platform.RateLimited], [`TransientSendError`][hub.platform.TransientSendError] and
[`PermanentSendError`][hub.platform.PermanentSendError] and send through a
[`Governor`][hub.platform.Governor], which honours ``retry_after``, spaces messages per chat and globally,
and gives up with [`SendFailed`][hub.platform.SendFailed] after a bounded number of attempts, so a send
that finally fails is a failed output in the run's log, never reported as sent.
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
