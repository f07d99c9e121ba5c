"""`jeeves-mcp systemd-units`: the systemd units the package carries (systemd/, their one copy,
in the wheel as jeeves_mcp/systemd/), filled in for this installation, printed or written for the
operator to install.
An installation from the wheel alone has no source tree, hence no `make install-systemd`."""

from __future__ import annotations

import os
import stat
import sys
import sysconfig
from pathlib import Path
from typing import Annotated

import typer

import jeeves_mcp
from jeeves_mcp.cli._common import fail

# Where each file goes on the host; the sysusers file takes its sysusers.d(5) name there.
DESTINATIONS = {
    "jeeves-mcp.service": "/etc/systemd/system/jeeves-mcp.service",
    "jeeves-mcp.socket": "/etc/systemd/system/jeeves-mcp.socket",
    "jeeves-mcp.sysusers": "/etc/sysusers.d/jeeves-mcp.conf",
}
DEFAULT_WORKSPACE = "/srv/jeeves/workspaces"  # as make install-systemd's WORKSPACES
# ProtectHome=yes hides these: a workspace or an installation there needs read-only.
UNDER_PROTECT_HOME = ("/home/", "/root/", "/run/user/")


def this_installation() -> str:
    """What ExecStart runs: this environment's console script, else this interpreter's module."""
    script = Path(sysconfig.get_path("scripts")) / "jeeves-mcp"
    return str(script) if script.is_file() else f"{sys.executable} -m jeeves_mcp"


def units_dir() -> Path:
    """The wheel's copy of the units, else the source tree's (an editable install)."""
    package = Path(jeeves_mcp.__file__).parent
    carried = package / "systemd"
    return carried if carried.is_dir() else package.parent / "systemd"


def filled_units(command: str, workspaces: list[str]) -> dict[str, str]:
    """The packaged units, the service's @...@ placeholders filled in as make install-systemd
    fills them."""
    packaged = units_dir()
    units = {name: (packaged / name).read_text() for name in DESTINATIONS}
    hidden = any(path.startswith(UNDER_PROTECT_HOME) for path in (*workspaces, command))
    units["jeeves-mcp.service"] = (
        units["jeeves-mcp.service"].replace("@JEEVES_MCP@", command)
        .replace("@READ_WRITE@", " ".join(f"-{path}" for path in workspaces))
        .replace("@PROTECT_HOME@", "read-only" if hidden else "yes")
    )
    return units


def _others_may_run(program: str) -> bool:
    """Whether a user of no group of the owner (the service's jeeves-mcp) may reach `program`."""
    path = Path(program.split()[0])
    try:
        return all(os.stat(folder).st_mode & stat.S_IXOTH for folder in (*path.parents, path))
    except OSError:
        return False


def systemd_units(
    out: Annotated[Path | None, typer.Option(
        "--out", metavar="DIR", exists=True, file_okay=False, dir_okay=True,
        help="Write jeeves-mcp.service, jeeves-mcp.socket and jeeves-mcp.sysusers into DIR "
             "(default: print them).", show_default=False)] = None,
    workspaces: Annotated[list[str] | None, typer.Option(
        "--workspace", metavar="DIR",
        help=f"Where run roots live (repeatable; default {DEFAULT_WORKSPACE}): the service may write "
             "only there, in its state dir and in /tmp.", show_default=False)] = None,
    command: Annotated[str | None, typer.Option(
        "--bin", metavar="PATH",
        help="The jeeves-mcp that ExecStart runs (default: this installation's).", show_default=False)] = None,
) -> None:
    """Print the systemd units for this installation, or write them into --out DIR.

    jeeves-mcp.service runs this installation's jeeves-mcp as the user jeeves-mcp;
    jeeves-mcp.socket holds its control socket, /run/jeeves-mcp/control.sock;
    jeeves-mcp.sysusers declares that user. Then, as root:

      install -m 0644 DIR/jeeves-mcp.service DIR/jeeves-mcp.socket /etc/systemd/system/
      install -m 0644 DIR/jeeves-mcp.sysusers /etc/sysusers.d/jeeves-mcp.conf
      systemd-sysusers && systemctl daemon-reload
      systemctl enable --now jeeves-mcp.socket   (the daemon starts on first use)
    """
    command = command or this_installation()
    units = filled_units(command, workspaces or [DEFAULT_WORKSPACE])
    if not _others_may_run(command):
        typer.echo(f"jeeves-mcp systemd-units: note: the service's user jeeves-mcp may not reach "
                   f"{command.split()[0]}: install under /opt, e.g. python3 -m venv /opt/jeeves-mcp", err=True)
    if out is None:
        for name, text in units.items():
            typer.echo(f"# ==> {DESTINATIONS[name]} <==\n{text}", nl=False)
        return
    for name, text in units.items():
        target = out / name
        try:
            target.write_text(text)
            target.chmod(0o644)
        except OSError as exc:
            raise fail("systemd-units", f"cannot write {target}: {exc.strerror or exc}", error="FAILED") from None
    service = out / "jeeves-mcp.service"
    protect = "read-only" if "ProtectHome=read-only" in units["jeeves-mcp.service"] else "yes"
    typer.echo(f"wrote {service} (ExecStart={command} daemon, ProtectHome={protect}), "
               f"{out / 'jeeves-mcp.socket'}, {out / 'jeeves-mcp.sysusers'}")
    typer.echo(f"next: sudo install -m 0644 {service} {out / 'jeeves-mcp.socket'} /etc/systemd/system/\n"
               f"      sudo install -m 0644 {out / 'jeeves-mcp.sysusers'} {DESTINATIONS['jeeves-mcp.sysusers']}\n"
               "      sudo systemd-sysusers && sudo systemctl daemon-reload\n"
               "      sudo systemctl enable --now jeeves-mcp.socket   (starts the daemon on first use)")
