"""Email, mail to reply on loopback: from the mail's delivery into the bot's folder (an IMAP
APPEND to a real Dovecot, whose IDLE tells the bot) until the SMTP server (aiosmtpd) took the
reply, median and p95, through the real ``aioimaplib`` and ``aiosmtplib`` clients.

    python bench/email_bench.py [--mails 100] [--json]

The model is scripted (it answers at once), so the figure is the hub's own path: IDLE's
wake-up, the fetch, reading the mail (new part, Authentication-Results), the intake
(recorded in the SQLite inbox before the mail is flagged read), the run and the SMTP
exchange (a new connection and login per mail). The delivery itself is timed from the
moment the APPEND completed. Needs Dovecot (``apt-get install dovecot-imapd``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from hub import Hub, ScriptedModel
from hub.testing import temp_config
from hub.testing.email import BOT, PASSWORD, Dovecot, SmtpSink, mail
from hub_email import EmailSettings, extension

ANSWER = '<response><output type="email:reply">pong</output></response>'


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


async def main(mails: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = temp_config(Path(tmp))
        async with Dovecot() as dovecot, SmtpSink() as smtp:
            settings = EmailSettings(
                imap_host="127.0.0.1",
                imap_port=dovecot.port,
                smtp_host="127.0.0.1",
                smtp_port=smtp.port,
                tls="none",
                username=BOT,
                password=PASSWORD,
                rate=(10_000, 1.0),
            )
            model = ScriptedModel([], default=ANSWER)
            async with Hub(cfg, model=model, load_extensions=False, extensions=[extension(settings)]):
                times: list[float] = []
                for i in range(mails + 5):  # the first five warm up
                    raw, _ = mail("ping", sender=f"user{i}@example.com")
                    await dovecot.deliver(raw)
                    start = time.monotonic()
                    await smtp.wait_sent(i + 1, timeout=30)
                    if i >= 5:
                        times.append((time.monotonic() - start) * 1000)
    return {
        "mails": mails,
        "median_ms": round(statistics.median(times), 2),
        "p95_ms": round(pct(times, 0.95), 2),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mails", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(main(args.mails))
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"email: mail to reply, {result['mails']} mails: median {result['median_ms']} ms, p95 {result['p95_ms']} ms"
        )
