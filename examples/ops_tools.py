"""Example tools of a small email/ops agent, as plain typed functions (pretend services).

Used by ``llassembly check examples/ops.asm --tools examples.ops_tools:TOOLS --summary``.
"""

from __future__ import annotations

_ALERTS = {"critical": ["web-1 down", "db-2 disk full"], "warning": ["cache slow"]}
RESTARTED: list[str] = []
"""The services restarted so far, in order."""
SENT: list[tuple[str, str]] = []
"""The emails sent so far: recipient and subject."""


def count_alerts(severity: str) -> int:
    """How many open alerts have this severity ("critical" or "warning")."""
    return len(_ALERTS.get(severity, []))


def alert_service(severity: str, index: int) -> str:
    """The service named in open alert number ``index`` (0-based) of a severity."""
    return _ALERTS[severity][index].split()[0]


def restart_service(service: str) -> bool:
    """Restart a service; true when it came back."""
    RESTARTED.append(service)
    return True


def send_email(to: str, subject: str, body: str) -> None:
    """Send an email."""
    SENT.append((to, subject))


TOOLS = [count_alerts, alert_service, restart_service, send_email]
