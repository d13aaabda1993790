"""`ascendctl`: chips, verdicts, fault history, isolation, resets and fault injection of one node."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from ascend_common.schemas.exporter import Assertion, ChipList
from ascend_common.schemas.verdict import VERDICTS_PATH, VerdictList
from ascend_common.tokens import Scope, TokenFileError, load_token_file
from rich.console import Console
from rich.json import JSON
from rich.text import Text

from ascendctl.client import ApiFailure, CliError, ServiceClient
from ascendctl.output import Column, OutputFormat, console, print_data, print_table

DEFAULT_EXPORTER_SOCKET = Path("/run/ascend/dcmi-exporter.sock")
DEFAULT_FAULT_MANAGER_SOCKET = Path("/run/ascend/fault-manager.sock")
DEVICEINFO_PREFIX = "mindx-dl-deviceinfo-"
CHIP_PATTERN = r"^(Ascend910|Ascend310P|Ascend310|npu)-\d{1,4}$"

P = ParamSpec("P")
R = TypeVar("R")

app = typer.Typer(
    name="ascendctl",
    help="Operator CLI for the Ascend node services (dcmi-exporter, fault-manager).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
sim_app = typer.Typer(help="Fault injection on a simulated node (exporter --backend sim).", no_args_is_help=True)
app.add_typer(sim_app, name="sim")


@dataclass(frozen=True)
class Options:
    exporter: ServiceClient
    fault_manager: ServiceClient
    json: bool
    output: OutputFormat | None = None  # this command's -o / --json (after the command, as kubectl takes it)

    @property
    def data(self) -> OutputFormat | None:
        """JSON or YAML of the API's answer, when asked for; None: the human form."""
        return self.output if self.output in (OutputFormat.JSON, OutputFormat.YAML) else None

    @property
    def wide(self) -> bool:
        return self.output is OutputFormat.WIDE


# Every command takes them after its name, as kubectl does; `--json` before the command still works.
Output = Annotated[
    OutputFormat | None, typer.Option("--output", "-o", help="json or yaml: the API's answer; wide: more columns.")
]
JsonFlag = Annotated[bool, typer.Option("--json", help="The same as -o json.")]


def _options(ctx: typer.Context, output: OutputFormat | None = None, json_flag: bool = False) -> Options:
    opts = ctx.find_root().obj
    if not isinstance(opts, Options):  # pragma: no cover - the callback always sets it
        raise RuntimeError("ascendctl: global options missing")
    if json_flag:
        if output not in (None, OutputFormat.JSON):
            raise CliError(f"--json and -o {output.value} disagree: give one of them")
        output = OutputFormat.JSON
    if opts.json:
        if output not in (None, OutputFormat.JSON):
            raise CliError(f"the global --json and -o {output.value} disagree: give one of them")
        output = OutputFormat.JSON
    return Options(opts.exporter, opts.fault_manager, opts.json, output)


def _console() -> Console:
    return console()


def _fail(message: str, code: int) -> typer.Exit:
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {message}", markup=True)
    return typer.Exit(code)


def handled(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn a CliError into a one-line message and its exit code (no traceback)."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except CliError as exc:
            raise _fail(_escape(exc.message), exc.exit_code) from None

    return wrapper


def _escape(text: str) -> str:
    return text.replace("[", "\\[")


def _red(text: str) -> Text:
    return Text(text, style="red")


def _yes_no(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "no")


def _check_chip(chip: str) -> None:
    if not re.fullmatch(CHIP_PATTERN, chip):
        raise CliError(f"{chip!r} is not a chip name (expected e.g. Ascend910-3)")


@app.callback()
def main_callback(
    ctx: typer.Context,
    exporter_socket: Annotated[
        Path, typer.Option(envvar="ASCENDCTL_EXPORTER_SOCKET", help="The dcmi-exporter's API socket.")
    ] = DEFAULT_EXPORTER_SOCKET,
    fault_manager_socket: Annotated[
        Path, typer.Option(envvar="ASCENDCTL_FAULT_MANAGER_SOCKET", help="The fault-manager's API socket.")
    ] = DEFAULT_FAULT_MANAGER_SOCKET,
    json_output: Annotated[bool, typer.Option("--json", help="Print the API's JSON instead of tables.")] = False,
    timeout: Annotated[float, typer.Option(min=0.1, max=300, help="Seconds to wait for a service.")] = 10.0,
) -> None:
    ctx.obj = Options(
        exporter=ServiceClient("dcmi-exporter", exporter_socket, timeout),
        fault_manager=ServiceClient("fault-manager", fault_manager_socket, timeout),
        json=json_output,
    )


@app.command()
@handled
def chips(ctx: typer.Context, output: Output = None, json_flag: JsonFlag = False) -> None:
    """The exporter's chips: ids, state, health, fault codes, HBM and temperature."""
    opts = _options(ctx, output, json_flag)
    raw = opts.exporter.request("GET", "/v1/chips")
    if opts.data:
        print_data(raw, opts.data)
        return
    listing = ChipList.model_validate(raw)
    columns = [
        Column("logic", keep=True), Column("phy", keep=True), Column("name", keep=True),
        Column("family", keep=True), Column("state"), Column("healthy"), Column("codes", keep=True),
        Column("HBM used/total MB", keep=True), Column("temp °C"),
        Column("card", keep=True, wide=True), Column("device", keep=True, wide=True),
        Column("chip", keep=True, wide=True), Column("product", wide=True), Column("power W", wide=True),
        Column("network healthy", wide=True), Column("processes", wide=True),
    ]  # fmt: skip
    rows: list[list[str | Text]] = []
    for c in sorted(listing.chips, key=lambda c: c.logic_id):
        codes = hbm = temp = power = procs = "-"
        if c.dynamic is not None:
            dyn = c.dynamic
            if dyn.error_codes.value is not None:
                codes = ",".join(dyn.error_codes.value) or "-"
            if dyn.hbm.value is not None:
                hbm = f"{dyn.hbm.value.used_mb}/{dyn.hbm.value.total_mb}"
            if dyn.temperature_c.value is not None:
                temp = str(dyn.temperature_c.value)
            if dyn.power_w.value is not None:
                power = f"{dyn.power_w.value:g}"
            if dyn.processes.value is not None:
                procs = str(len(dyn.processes.value))
        static = c.static
        rows.append([
            str(c.logic_id), str(c.phy_id), c.name, c.family.value if c.family is not None else "?", c.state.value,
            _red("no") if c.healthy is False else _yes_no(c.healthy), codes, hbm, temp,
            str(c.card_id), str(c.device_id), static.chip_name.value or "?", static.product_type.value or "-", power,
            _yes_no(c.network_healthy), procs,
        ])  # fmt: skip
    print_table(f"{len(listing.chips)} chips", columns, rows, wide=opts.wide)


@app.command()
@handled
def verdicts(ctx: typer.Context, output: Output = None, json_flag: JsonFlag = False) -> None:
    """The fault-manager's verdict per chip: level, schedulable, reason, codes."""
    opts = _options(ctx, output, json_flag)
    raw = opts.fault_manager.request("GET", VERDICTS_PATH)
    if opts.data:
        print_data(raw, opts.data)
        return
    listing = VerdictList.model_validate(raw)
    columns = [
        Column("chip", keep=True), Column("level", keep=True), Column("schedulable"), Column("reason", keep=True),
        Column("codes", keep=True), Column("manually separated"), Column("resetting"),
        Column("logic", keep=True, wide=True), Column("phy", keep=True, wide=True),
        Column("network level", keep=True, wide=True), Column("network healthy", wide=True),
        Column("since (UTC)", wide=True),
    ]  # fmt: skip
    rows: list[list[str | Text]] = []
    for v in sorted(listing.verdicts, key=lambda v: v.logic_id):
        level = v.fault_level.value
        rows.append([
            v.chip, level if level == "NormalNPU" else Text(level, style="yellow"),
            _yes_no(v.schedulable) if v.schedulable else _red("no"), v.reason.value, ",".join(v.codes) or "-",
            _yes_no(v.manually_separated), _yes_no(v.resetting),
            str(v.logic_id), str(v.phy_id), v.network_level.value, _yes_no(v.network_healthy), _ms(int(v.since * 1000)),
        ])  # fmt: skip
    print_table(f"verdicts (epoch {listing.epoch}, revision {listing.revision})", columns, rows, wide=opts.wide)


def _ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


@app.command()
@handled
def faults(
    ctx: typer.Context,
    chip: Annotated[str, typer.Option(help="Chip name, e.g. Ascend910-3.")],
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many records, newest first.")] = 100,
    before_id: Annotated[int | None, typer.Option(min=0, help="Page on: records older than this id.")] = None,
    output: Output = None,
    json_flag: JsonFlag = False,
) -> None:
    """A chip's fault history (newest first)."""
    opts = _options(ctx, output, json_flag)
    _check_chip(chip)
    params: dict[str, Any] = {"chip": chip, "limit": limit}
    if before_id is not None:
        params["before_id"] = before_id
    raw = opts.fault_manager.request("GET", "/v1/faults", params=params)
    if opts.data:
        print_data(raw, opts.data)
        return
    records: list[dict[str, Any]] = raw.get("faults", [])
    columns = [
        Column("raised at (UTC)", keep=True), Column("code", keep=True), Column("assertion", keep=True),
        Column("severity"), Column("source", keep=True), Column("event id", keep=True),
    ]  # fmt: skip
    rows: list[list[str | Text]] = []
    for r in records:
        severity = r.get("severity")
        shown_severity = "-" if severity is None else str(severity)
        rows.append([
            _ms(int(r["raised_at_ms"])), str(r["code"]), str(r["assertion"]), shown_severity,
            str(r["source"]), str(r["event_id"]),
        ])  # fmt: skip
    out = _console()
    print_table(f"faults of {chip} ({len(records)})", columns, rows, wide=opts.wide, out=out)
    if raw.get("next_before_id") is not None:
        out.print(f"more: --before-id {raw['next_before_id']}")


def _separation(ctx: typer.Context, chip: str, method: str, output: OutputFormat | None, json_flag: bool) -> None:
    opts = _options(ctx, output, json_flag)
    _check_chip(chip)
    raw = opts.fault_manager.request(method, f"/v1/chips/{chip}/separation")
    if opts.data:
        print_data(raw, opts.data)
        return
    state = "manually separated" if raw.get("manually_separated") else "no longer manually separated"
    _console().print(f"{raw.get('chip', chip)}: {state}")


@app.command()
@handled
def separate(
    ctx: typer.Context,
    chip: Annotated[str, typer.Argument(help="Chip name, e.g. Ascend910-3.")],
    output: Output = None,
    json_flag: JsonFlag = False,
) -> None:
    """Isolate a chip by hand (it stays unschedulable until unseparated)."""
    _separation(ctx, chip, "POST", output, json_flag)


@app.command()
@handled
def unseparate(
    ctx: typer.Context,
    chip: Annotated[str, typer.Argument(help="Chip name, e.g. Ascend910-3.")],
    output: Output = None,
    json_flag: JsonFlag = False,
) -> None:
    """Lift a manual isolation."""
    _separation(ctx, chip, "DELETE", output, json_flag)


@app.command()
@handled
def reset(
    ctx: typer.Context,
    chip: Annotated[str, typer.Argument(help="Chip name, e.g. Ascend910-3.")],
    output: Output = None,
    json_flag: JsonFlag = False,
) -> None:
    """Ask the fault-manager to hot-reset a chip (and its reset group)."""
    opts = _options(ctx, output, json_flag)
    _check_chip(chip)
    try:
        raw = opts.fault_manager.request("POST", f"/v1/chips/{chip}/reset")
    except ApiFailure as exc:
        if exc.status == 409:
            raise CliError(f"{chip} not reset: {exc.detail}") from None
        raise
    if opts.data:
        print_data(raw, opts.data)
        return
    group = ", ".join(raw.get("chips", [])) if isinstance(raw, dict) else ""
    _console().print(f"reset started for group: {group or chip} (follow it in GET /v1/resets)")


@app.command()
@handled
def resets(ctx: typer.Context, output: Output = None, json_flag: JsonFlag = False) -> None:
    """Hot resets: recent attempts (and why one failed or was refused), groups left for an operator,
    the node annotation ResetInfo as written, and the reset tokens left per chip."""
    opts = _options(ctx, output, json_flag)
    raw = opts.fault_manager.request("GET", "/v1/resets")
    if opts.data:
        print_data(raw, opts.data)
        return
    view: dict[str, Any] = raw if isinstance(raw, dict) else {}
    console = _console()
    if not view.get("enabled"):
        console.print("hot reset is off (the fault-manager runs with neither --hot-reset nor --hot-reset-mode 0)")
        return
    columns = [
        Column("id", keep=True), Column("chips", keep=True), Column("channel", keep=True), Column("started", keep=True),
        Column("outcome", keep=True), Column("code", keep=True), Column("reason"),
    ]  # fmt: skip
    rows: list[list[str | Text]] = []
    for a in view.get("attempts", []):
        code = "-" if a["error_code"] is None else str(a["error_code"])
        rows.append([
            str(a["id"]), ",".join(a["chips"]), a["channel"], _ms(a["started_ms"]), a["outcome"] or "running", code,
            a.get("reason") or "-",
        ])  # fmt: skip
    print_table("reset attempts", columns, rows, wide=opts.wide, out=console)
    for item in view.get("operator", []):
        console.print(f"[bold red]needs an operator[/]: {_escape(','.join(item['chips']))}: {_escape(item['reason'])}")
    info = view.get("reset_info") or {}
    for key in ("ManualResetDevs", "ThirdPartyResetDevs"):
        devs = info.get(key) or []
        listed = ", ".join(f"phy {d['PhyID']} (logic {d['LogicID']}, card {d['CardId']})" for d in devs)
        console.print(f"ResetInfo {key}: {_escape(listed) if devs else 'none'}")
    tokens = view.get("tokens") or {}
    if tokens:
        console.print("reset tokens left: " + ", ".join(f"{_escape(c)} {n}" for c, n in tokens.items()))


@app.command()
@handled
def deviceinfo(ctx: typer.Context, output: Output = None, json_flag: JsonFlag = False) -> None:
    """The node's device-info ConfigMap (mindx-dl-deviceinfo-<node>) as the fault-manager writes it offline."""
    opts = _options(ctx, output, json_flag)
    try:
        raw = opts.fault_manager.request("GET", "/v1/kube/objects")
    except ApiFailure as exc:
        if exc.status == 404:
            raise CliError(
                "the fault-manager runs with --kube api: it keeps no offline objects; the device-info ConfigMap "
                f"is in the cluster (kubectl -n kube-system get configmap {DEVICEINFO_PREFIX}<node> -o yaml)"
            ) from None
        raise
    objects: list[dict[str, Any]] = raw if isinstance(raw, list) else []
    found = [
        o
        for o in objects
        if o.get("kind", "ConfigMap") == "ConfigMap"
        and str(o.get("metadata", {}).get("name", "")).startswith(DEVICEINFO_PREFIX)
    ]
    if opts.data:
        print_data(found, opts.data)
        return
    if not found:
        raise CliError("no device-info ConfigMap yet (the fault-manager writes it once it has verdicts)")
    console = _console()
    for cm in found:
        meta = cm.get("metadata", {})
        console.print(f"[bold]ConfigMap {meta.get('namespace', '?')}/{meta.get('name', '?')}[/]")
        for key, value in sorted((cm.get("data") or {}).items()):
            console.print(f"[bold cyan]{_escape(key)}[/]:")
            try:
                console.print(JSON.from_data(json.loads(value), indent=2))
            except (TypeError, ValueError):
                console.print(str(value), markup=False)


def _sim_token(path: Path) -> str:
    try:
        table = load_token_file(path)
    except OSError as exc:
        raise CliError(f"cannot read token file {path}: {exc.strerror or exc}") from None
    except TokenFileError as exc:
        raise CliError(str(exc)) from None
    for token, scopes in table.entries:
        if Scope.SIM in scopes:
            return token
    raise CliError(f"{path}: no token with scope 'sim'")


@sim_app.command("inject")
@handled
def sim_inject(
    ctx: typer.Context,
    chip: Annotated[int, typer.Option(min=0, max=65535, help="The chip's logic id.")],
    code: Annotated[str, typer.Option(help="Hex fault code, e.g. 8C1FA006.")],
    token_file: Annotated[
        Path, typer.Option(envvar="ASCENDCTL_TOKEN_FILE", help="Token file ('<token> <scopes>' lines).")
    ],
    assertion: Annotated[Assertion, typer.Option(help="occur, recover or once.")] = Assertion.OCCUR,
    severity: Annotated[int, typer.Option(min=0, max=3, help="0 warning .. 3 critical.")] = 2,
    output: Output = None,
    json_flag: JsonFlag = False,
) -> None:
    """Inject a fault event into a simulated chip."""
    opts = _options(ctx, output, json_flag)
    token = _sim_token(token_file)
    body = {"code": code, "assertion": assertion.value, "severity": severity}
    raw = opts.exporter.request(
        "POST", f"/v1/sim/chips/{chip}/faults", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    if opts.data:
        print_data(raw if raw is not None else {"injected": body | {"logic_id": chip}}, opts.data)
        return
    _console().print(f"injected {code.upper()} ({assertion.value}, severity {severity}) into chip {chip}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
