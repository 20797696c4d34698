"""What the planners, policies, runners and checks a plugin registers must provide.

These are structural types: any object with these members works, and there is
nothing to inherit from. A small :func:`attrs.frozen` class is the usual
choice: its fields give ``name`` and ``description``, and a policy's
parameters become fields that ``configure`` replaces with :func:`attrs.evolve`.
The package is typed (it ships ``py.typed``), so a type checker tells you when
an object does not fit.

The agent checks every object as it is registered: one that lacks a member,
a policy whose ``activation`` is not one of the three, or a class registered
instead of an instance, is left out with a warning naming the plugin.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from .errors import Rejection
from .model import (
    CommandResult,
    Finding,
    PatchPlan,
    PlannerResult,
    PlanRequest,
    SandboxJob,
    SandboxOutcome,
    SeedProject,
    TokenUsage,
    TrajectoryStep,
)

if TYPE_CHECKING:
    import typer


@runtime_checkable
class PatchPolicy(Protocol):
    """Decides whether a plan may reach a sandbox.

    Registered with :func:`~sandboxed_coding_agent.core.hookspecs.register_policies`.
    Every active policy checks every plan, after the patch contract has checked
    its shape, and all their reasons are reported together; a rejected plan
    never reaches a sandbox and the command exits with status 4. The policies
    that apply to a run are the ``always`` ones, the ``on`` ones unless the user
    passes ``--no-policy NAME``, and the ``off`` ones that the seed (its
    ``[policies.NAME]`` table) or the user (``--policy NAME``,
    ``--policy-param NAME.KEY=VALUE``) switches on; the user's ``--no-policy
    NAME`` wins over the seed.

    A policy that takes parameters should also declare them (see
    :class:`ParameterizedPolicy`): ``agent policies list`` then shows them, and
    the agent checks every value's type, unknown keys and missing required ones
    before calling ``configure``.
    """

    @property
    def name(self) -> str:
        """How users and seeds refer to the policy (``--policy NAME``,
        ``[policies.NAME]``), and the ``policy`` of its rejections.

        By convention lower case words joined by ``-``, such as ``no-todo``. A name another
        plugin registered first is refused (built-in plugins register first).
        """
        ...

    @property
    def description(self) -> str:
        """One line for ``agent policies list``: what the policy rejects."""
        ...

    @property
    def activation(self) -> str:
        """When the policy runs: ``"always"``, ``"on"`` or ``"off"``.

        * ``"always"``: on every plan, and nobody can switch it off (the patch contract).
        * ``"on"``: unless the user passes ``--no-policy NAME``.
        * ``"off"``: only when a seed's ``[policies.NAME]`` table or the user's
          ``--policy NAME`` switches it on.

        Prefer ``"off"`` for a rule that encodes one team's taste, so that
        installing your plugin does not change every other seed's runs.
        """
        ...

    def configure(self, parameters: Mapping[str, Any]) -> PatchPolicy:
        """Return the policy to use for a seed that gives it parameters.

        Called for each active policy whose seed gives it parameters, before
        any plan is checked, and whenever a folder's ``seed.toml`` is read, to
        check them there with their line; never called without parameters. Leave ``self`` as it
        is and return a new object, for example with :func:`attrs.evolve`.

        :param parameters: the keys of the seed's ``[policies.NAME]`` table and
            of the user's ``--policy-param NAME.KEY=VALUE`` (which win), as TOML
            gives them (``str``, ``int``, ``float``, ``bool``, lists, tables);
            when the policy declares its parameters, already checked against
            the declaration (only the keys given: defaults are not filled in).
        :returns: the configured policy: an object with these same members.
        :raises ValueError: (or :class:`TypeError`) naming the parameter that is
            unknown or wrong; the user sees the message, after the seed's name
            and the line of its table. A policy without parameters raises it
            for any.
        """
        ...

    def check(self, plan: PatchPlan, seed: SeedProject) -> Iterable[Rejection]:
        """Give one rejection for each reason to refuse ``plan``; none to accept it.

        Return a list (an empty one accepts the plan) or yield each
        :class:`~sandboxed_coding_agent.core.errors.Rejection`. Give them
        ``policy=self.name``, a short, stable ``rule`` (users search for it),
        a ``message`` for a person, and the ``path`` of the file concerned
        (``None`` for the whole plan). Change nothing and do not raise for a
        bad plan: a bad plan is a rejection. A ``check`` that raises, or
        answers with anything but rejections (``None``, a string, a single
        Rejection), rejects the plan with rule ``policy-failed`` and a message
        saying what went wrong (for an exception, with the line of your file it
        came from), so that a broken policy never lets a plan through.

        :param plan: the plan, already in the contract's shape: 1 to
            ``seed.limits.max_files`` files, each an editable path of the seed
            with its whole new text.
        :param seed: the seed the plan is for; :meth:`SeedProject.read_files`
            gives the files as they are now, for a diff.
        """
        ...


#: The types a :class:`PolicyParameter` may declare, and how messages name them. A TOML
#: integer is an ``int`` (never ``true``/``false``); a ``float`` also takes an integer.
PARAMETER_TYPES: Mapping[str, str] = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "list[str]": "a list of strings",
    "list[int]": "a list of integers",
    "list[float]": "a list of numbers",
    "list": "a list",
    "table": "a table",
    "any": "any TOML value",
}


@attrs.frozen
class PolicyParameter:
    """One parameter a policy takes, as its :attr:`ParameterizedPolicy.parameters` declare it.

    ``agent policies list`` shows it; the agent checks each value given (in a
    seed's ``[policies.NAME]`` table or with ``--policy-param NAME.KEY=VALUE``)
    against it before calling ``configure``, and reports one message naming the
    policy, the key, the expected type and the value.

    :ivar name: the key: letters, digits, ``_`` and ``-``, starting with a letter or ``_``.
    :ivar type: one of :data:`PARAMETER_TYPES` (``"int"``, ``"list[str]"``, ...).
    :ivar description: one line for ``agent policies list``.
    :ivar default: what the policy uses when the key is not given, as shown to
        users (``None``: no default, or one that needs words: say so in ``description``).
    :ivar required: whether the policy cannot run without it: a run that switches
        the policy on without the key is refused before any plan is checked.
    """

    name: str = attrs.field(validator=attrs.validators.matches_re(r"[A-Za-z_][A-Za-z0-9_-]{0,63}"))
    type: str = attrs.field(validator=attrs.validators.in_(tuple(PARAMETER_TYPES)))
    description: str = ""
    default: Any = None
    required: bool = False


@runtime_checkable
class ParameterizedPolicy(Protocol):
    """A policy that declares the parameters its ``configure`` takes.

    A policy that has ``parameters`` is a parameterized policy; there is nothing
    to register separately, and a policy without it works as before (its
    ``configure`` alone checks what it is given)::

        @attrs.frozen
        class SmallDiff:
            name: str = "small-diff"
            ...
            parameters: ClassVar[tuple[PolicyParameter, ...]] = (
                PolicyParameter("max_changed_lines", "int", "most lines a file may change", 20),
            )

    (``ClassVar`` keeps the declaration out of the attrs fields, so that
    ``attrs.evolve`` and run records see only the policy's own settings.)
    """

    @property
    def parameters(self) -> Sequence[PolicyParameter]:
        """Every parameter ``configure`` accepts; a key not declared is refused before it."""
        ...


@runtime_checkable
class Planner(Protocol):
    """Makes a plan for a seed: usually by asking a model, but anything that returns one will do.

    Registered with :func:`~sandboxed_coding_agent.core.hookspecs.register_planners`
    and selected with ``agent run --planner NAME`` (the default is the built-in
    ``openai``); ``agent run --plan FILE`` uses no planner at all. The request
    and the result are plain data, so a planner may do its work in another
    process or on another machine.
    """

    @property
    def name(self) -> str:
        """How ``agent run --planner NAME`` selects it; also the ``planner`` of its results."""
        ...

    @property
    def description(self) -> str:
        """One line for ``agent plugins list``: what the planner asks, and what it needs."""
        ...

    def plan(self, request: PlanRequest) -> PlannerResult:
        """Make one plan for ``request``.

        Called once per attempt of each candidate of an ``agent run`` without
        ``--plan`` (once, without ``--attempts`` and ``--candidates``), before
        any policy or sandbox. With ``--candidates`` the calls come from several
        threads at once, so keep no per-call state on the planner object.
        Give every call a new planner task ID (up to 128 letters, digits, ``-``
        and ``_``, such as ``"replay-" + secrets.token_hex(8)``),
        and put it in the result and in every error you raise, so that a user
        can find the call in your logs. Check the plan with
        :func:`~sandboxed_coding_agent.core.plans.contract.validate_plan` before
        returning it (the agent checks it again anyway).

        A repair attempt (``agent run --attempts N``) has ``request.feedback``:
        the previous attempt's files and the end of its test's output, or the
        policies' reasons for refusing it; show it to the model, since it is the
        whole point of the attempt. Ask for ``request.options.temperature`` where
        the backend has such a setting (above 0 only for parallel candidates,
        unless the user says otherwise).

        :param request: the instruction, every seed file but the hidden tests,
            the editable paths, the limits, the options and any feedback;
            everything the planner may show a model. It is plain data
            (:mod:`~sandboxed_coding_agent.core.serialization` round-trips it),
            so it can be sent as it is to a planner elsewhere.
        :returns: the plan with the task ID and, when known, the model, the
            provider's response ID, the token usage and the call's duration.
        :raises ConfigurationError: a setting it needs (an environment
            variable, say) is missing or invalid; the command exits 2.
        :raises ProviderError: for anything else that keeps it from making a
            plan (unreachable, refused, a malformed answer), with
            ``planner_task_id``; the command exits 3 and creates no sandbox.
        :raises PlanRejected: from
            :func:`~sandboxed_coding_agent.core.plans.contract.validate_plan`, when the
            plan breaks the contract; the command exits 4. Any other exception
            is reported as an internal error (exit 70).
        """
        ...


class Session(Protocol):
    """What a :class:`SessionPlanner` works in: shell commands on the seed, one at a time.

    The agent's own is ``sandboxed_coding_agent.core.runs.sessions.Session``: each
    command runs as ``bash -c COMMAND`` in the project folder, in a fresh sandbox of the
    run's runner, and only the project's files are carried to the next command.

    """

    @property
    def seed(self) -> SeedProject:
        """The seed the session was opened on."""
        ...

    @property
    def command_seconds(self) -> float:
        """How long one command may run."""
        ...

    @property
    def files(self) -> Mapping[str, bytes]:
        """The session's project files now, by path (no hidden test among them)."""
        ...

    @property
    def tests(self) -> Sequence[str]:
        """The seed's test files the session holds: read-only in every command."""
        ...

    def run(self, command: str, *, seconds: float | None = None) -> CommandResult:
        """Run ``command`` in a fresh sandbox holding the session's files, and keep the
        files it leaves for the next command."""
        ...

    def changes(self) -> Mapping[str, bytes | None]:
        """Each file that differs from the seed's: its bytes now, or ``None`` if deleted."""
        ...


class Journal(Protocol):
    """Where a :class:`SessionPlanner` keeps its steps, and asks about the run's budgets.

    The agent's own is ``sandboxed_coding_agent.core.runs.exploration.Journal``, which
    writes each step to the trajectory of the planner call as it is kept.
    """

    def keep(self, task_id: str, step: TrajectoryStep) -> None:
        """Keep ``step`` of the planner call ``task_id``, now (a killed run keeps it)."""
        ...

    def budget_reached(self, usage: TokenUsage | None, model: str | None = None) -> str | None:
        """The bound the run has reached with ``usage`` spent so far, if any; else ``None``."""
        ...


@runtime_checkable
class SessionPlanner(Protocol):
    """A planner that explores: it works in a session on the seed before it proposes a plan.

    A :class:`Planner` that also has ``plan_in_session`` is called through it instead
    of ``plan``: the agent opens a session
    (``sandboxed_coding_agent.core.runs.sessions.Session``) on the run's seed with
    the run's runner for each candidate, and hands the same session to each of its
    attempts (a repair continues where the last attempt left off). The session holds
    no sandbox between commands, so there is nothing to close. The plan it returns
    is checked by the policies and tested in a fresh sandbox from the pristine seed,
    as any plan is; never in the session.
    """

    def plan_in_session(
        self, request: PlanRequest, session: Session, journal: Journal
    ) -> PlannerResult:
        """Make one plan for ``request``, working in ``session``.

        As :meth:`Planner.plan`, and besides: keep each step with
        :meth:`Journal.keep` as it ends, and before each provider call ask
        :meth:`Journal.budget_reached`; once it
        names a bound, raise :class:`~sandboxed_coding_agent.core.errors.BudgetReached`.
        """
        ...


@runtime_checkable
class Runner(Protocol):
    """Runs a seed's test on the patched files in a sandbox, and terminates the sandbox.

    Registered with :func:`~sandboxed_coding_agent.core.hookspecs.register_runners`
    and selected with ``agent run --runner NAME`` (the default is the built-in
    ``local``, a bubblewrap sandbox). The job and the outcome are plain data, so
    the sandbox may be on another machine.
    """

    @property
    def name(self) -> str:
        """How ``agent run --runner NAME`` selects it; also the ``runner`` of its outcomes."""
        ...

    @property
    def description(self) -> str:
        """One line for ``agent plugins list``: where and how it runs the test."""
        ...

    def run_test(self, job: SandboxJob) -> SandboxOutcome:
        """Test ``job`` in a new sandbox, and terminate the sandbox whatever happens.

        Called for each plan that every policy accepted: once per ``agent
        run``, or once per attempt and candidate with ``--attempts`` and
        ``--candidates``, then from several threads at once (at most ``--jobs``
        sandboxes at a time), so keep no per-call state on the runner object.
        Create a sandbox holding only ``job.files`` (no secrets, no network),
        run ``job.test_command`` in the folder holding them, within
        ``job.limits`` (``test_timeout_seconds``, the output bounds and the
        resource limits your sandbox can enforce), and terminate the sandbox
        before returning or raising, also on ``KeyboardInterrupt``. Give each
        sandbox a new ID.

        What the test may import is part of the result: with no
        ``job.runtime``, it gets its interpreter's standard library and the
        job's files only (the local runner hides the interpreter's global
        site folders); with one, that runtime and nothing more. A remote
        runner whose image adds packages to every sandbox must say so in its
        description and documentation, since a seed may then pass there and
        fail elsewhere.

        What the built-in runners do, and what every runner must do, so that a
        seed passes or fails alike on each:

        * **The interpreter.** A test command whose first word is ``python`` or
          ``python3`` runs the runtime's interpreter: with ``job.runtime``, the
          environment's ``python``; without, the agent's own interpreter (the
          local runner) or the image's Python of the agent's version (LazyCloud).
          Any other first word is looked up on ``PATH``. Seeds write ``python``,
          never a path.
        * **The environment.** Start the test with a cleared environment: no
          variable of the caller (never a key), only ``PATH``, ``HOME`` (a
          writable scratch folder), ``LANG=C.UTF-8`` and
          ``PYTHONDONTWRITEBYTECODE=1``. ``PATH`` is the runtime's ``bin``
          folder (its scripts, ``pytest`` say), or the interpreter's folder
          without a runtime, then ``/usr/local/bin:/usr/bin:/bin``.
        * **The folder.** The test runs in a writable folder holding exactly
          ``job.files`` (with the replacement applied; the local runner uses
          ``/workspace``, LazyCloud ``/workspace/seed``); nothing there survives
          the sandbox.
        * **A timeout.** When the test runs past ``job.limits.test_timeout_seconds``,
          kill it and everything it started, and return ``exit_code=None``,
          ``timed_out=True`` and ``limit_hit="timeout"``, with the output it had
          written so far. A test stopped at another limit the runner can tell
          (``"output"``, ``"memory"``, ``"processes"``, ``"cpu"``,
          ``"file-size"``, ``"disk"``: see
          :data:`~sandboxed_coding_agent.core.model.LIMITS`) has that
          ``limit_hit`` and ``timed_out=False``; ``exit_code`` is the process's
          code, or ``None`` when it was killed (the local runner also gives
          ``None`` for an output flood, which it stops). A test that ends on
          its own with a code other than 0 has that code and ``limit_hit=None``,
          unless the runner knows a limit caused it.
        * **The output.** ``output`` is stdout and stderr together, as text
          (bytes that are not UTF-8 replaced), at most
          ``job.limits.max_output_bytes`` of it: collect it with
          :class:`~sandboxed_coding_agent.core.output.BoundedOutput`, which keeps
          the first three quarters and the last quarter of the bound and marks
          the cut on a line of its own, ``[output truncated: N bytes in all;
          kept the first H and the last T]``, and set ``output_truncated``. A
          backend that cut the output itself says so on a last line (LazyCloud:
          ``[output truncated by LazyCloud]``).
        * **The sandbox ID.** Each sandbox gets a new ID, unique across runs:
          up to 128 letters, digits, ``-`` and ``_``, starting with a short
          prefix naming the runner (the local runner's ``sbx-`` and 16
          hexadecimal digits), or the backend's own ID when it has one
          (LazyCloud's), so that a user can find the sandbox in the backend's
          logs. It is in the outcome and in every ``SandboxError`` about that
          sandbox.
        * **A runtime.** A runner on this machine prepares ``job.runtime`` with
          :func:`~sandboxed_coding_agent.core.seeds.runtime.prepare_runtime`
          (in ``prepare``, see :class:`PreparingRunner`, and again here, where it
          is found ready) and gives the sandbox its folders read-only, at the
          same path; a remote runner builds an image with the runtime's Python
          and requirements.
        * **The evidence.** With ``job.harness``, run the harness
          (``core/harness``, whose files ``core.harness.files()`` gives) as the
          test's first process instead of the test command, with
          ``core.verdicts.verdict.harness_settings(...)`` on the
          descriptor it is started with, and return what it wrote to its report
          descriptor in ``report``; the agent verifies it. The files the harness
          names as tests must be read-only in the sandbox, and the harness's
          exit status must be what no other process of the sandbox can change
          (the local runner: ``bwrap --as-pid-1``). A runner that cannot leaves
          ``report`` ``None``: the verdict then rests on the exit status alone,
          and the result says so.
        * **Sessions.** A job with ``job.session`` is one shell command of a
          session (``core.runs.sessions``): run the
          harness as for any job with ``job.harness``; its settings then tell it
          to run the command, stop it at ``job.session.timeout_seconds``, kill
          every other process of the sandbox, and write the project folder's
          files to its report, which you return as for a test. A runner that runs
          the harness so offers sessions with no code of its own; one that does
          not returns ``report=None`` and the session says the runner offers none.
          ``core.testing.check_sessions`` checks a
          runner against this.

        :param job: the files with the replacement applied, the test command,
            the limits and the runtime the test needs.
        :returns: the outcome: a test that fails, times out or hits a limit is
            a normal outcome (``exit_code``, ``timed_out``, ``limit_hit``), not an error.
        :raises SandboxError: with ``sandbox_id``, when the sandbox cannot be
            created or fails for its own reasons; the command exits 5.
        """
        ...


@runtime_checkable
class StoppableRunner(Protocol):
    """A runner whose sandbox the agent can stop before the test ends.

    A runner that has ``run_test_until`` is a stoppable runner; there is nothing
    to register separately. ``agent run --candidates K`` uses it for every
    sandbox, so that ``--first-pass`` (once one candidate passed), an error in
    another candidate, and Ctrl-C terminate the running sandboxes at once; a
    runner without it has its running sandboxes waited for until their tests end.
    """

    def run_test_until(self, job: SandboxJob, stop: threading.Event) -> SandboxOutcome:
        """Like :meth:`Runner.run_test`, but terminate the sandbox as soon as ``stop`` is set.

        Called from a worker thread. Notice ``stop`` within a fraction of a
        second, terminate the sandbox as ``run_test`` would after a timeout, and
        return the outcome as far as it got (the agent counts the attempt as
        stopped); raise only for the reasons ``run_test`` would.

        :param job: as for ``run_test``.
        :param stop: set by the agent when the sandbox is no longer wanted; it may be
            set before the call, and then no test needs to start.
        """
        ...


@runtime_checkable
class PreparingRunner(Protocol):
    """A runner that also has slow, one-time work to do before a sandbox starts.

    A runner that has ``prepare`` is a preparing runner; there is nothing to
    register separately.
    """

    def prepare(self, job: SandboxJob, progress: Callable[[str], None]) -> None:
        """Do the slow work ``job`` needs before ``run_test``, outside any sandbox.

        Called once per run, just before the first ``run_test``, for work such as building
        ``job.runtime`` with network access. ``run_test`` must still work
        without it (preparing then, silently).

        :param job: the job about to be tested.
        :param progress: call with one line of text at a time, to tell the user
            what takes long (it goes to stderr).
        :raises SandboxError: when the preparation fails.
        """
        ...


@attrs.frozen
class DoctorContext:
    """What ``agent doctor`` checks the machine for: the planner and the runner in use.

    ``agent doctor`` checks for the defaults (the ``openai`` planner and the
    ``local`` runner) unless told otherwise (``--planner NAME``,
    ``--no-planner`` for plan files only, ``--runner NAME``).

    :ivar planner: the planner's name, or ``None`` when no planner is used (``--plan FILE``).
    :ivar runner: the runner's name.
    """

    planner: str | None
    runner: str


@runtime_checkable
class Check(Protocol):
    """Checks, for ``agent doctor``, something a plugin needs on this machine.

    Registered with :func:`~sandboxed_coding_agent.core.hookspecs.register_checks`.
    When a plugin registers planners or runners and none of them is in use (see
    :class:`DoctorContext`), its checks' failed items are shown as information,
    not failures: a user of another planner is not told to set up this one.
    """

    @property
    def name(self) -> str:
        """Names the check, unique among all plugins' checks."""
        ...

    @property
    def description(self) -> str:
        """One line: what it checks."""
        ...

    def run(self) -> Iterable[Finding]:
        """Check, for real, and report one finding per item checked.

        Called only by ``agent doctor``. Try the thing (start a process,
        import a module) rather than guess, take a few seconds at most, never
        show a secret, and do not raise for a problem you find: a problem is a
        :class:`~sandboxed_coding_agent.core.model.Finding` with ``ok=False``
        and its ``fix`` (a check that raises becomes a failed item naming its
        plugin).

        A ``run`` that takes a parameter named ``context`` (``def run(self,
        context: DoctorContext | None = None)``) is given the
        :class:`DoctorContext`, so that it can tell whether its planner or runner
        is the one in use (say, to check a runner's credentials only when it is).

        :returns: (or yields) the findings, OK or not.
        """
        ...


@runtime_checkable
class CommandGroup(Protocol):
    """Commands a plugin adds to ``agent``, under one name: ``agent NAME COMMAND ...``.

    Registered with :func:`~sandboxed_coding_agent.core.hookspecs.register_commands`.
    Registering must stay cheap (``agent --help`` lists every group): keep the
    object small and import your heavy libraries inside the commands, when
    they run.
    """

    @property
    def name(self) -> str:
        """The group's word on the command line (``agent NAME ...``), lower case.

        A name that a built-in command or another plugin's group has is refused.
        """
        ...

    @property
    def help(self) -> str:
        """One line for ``agent --help``: what the commands are for."""
        ...

    def build(self) -> typer.Typer:
        """Return the group's commands as a :class:`typer.Typer` app.

        Called once, when ``agent`` starts a command line that may name the
        group (``agent NAME ...``, ``agent --help``), never for the built-in
        commands. Every command reports its failures by raising an
        :class:`~sandboxed_coding_agent.core.errors.AgentError`, inside
        :func:`~sandboxed_coding_agent.core.commands.reporting`, which prints
        one message (or, with ``--json``, one JSON object) and exits with the
        error's documented code.
        """
        ...
