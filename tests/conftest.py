"""Fixtures shared by the test files (regular polygons come from attention_fw.geometry.polytope.regular_polygon),
and the parallel run of ``make test`` (pytest-xdist, ``-n auto --dist loadgroup``):

* the session folder shared by the workers (``sessiondir.py``): what is made once per session (the
  quick book build, the figure writer's reference runs) is made there under a file lock;
* the quick book build starts, in a background thread, as soon as a collected test needs it, and
  a worker does not exit while a build it started is running;
* a module whose tests share an expensive module-scoped fixture runs as one unit on one worker
  (``MODULE_GROUPS``, the scheduler below), so that the fixture is made once;
* the longest units are queued first, so that no worker is left with a long test at the end
  (``LONGEST_FIRST``, from ``pytest --durations``); the order within a module is kept.
"""
import os

import blas_threads  # noqa: F401  (first: one BLAS thread, set before numpy loads BLAS)
import numpy as np
import pytest

import bookbuild
import sessiondir
from attention_fw.model import _sampling
from attention_fw.model import dynamics as D
from cdp import INSTALL_HINT, Browser, chromium_executable

# The library leaves matplotlib's backend alone; the tests (and the processes they start) never open a window.
os.environ.setdefault("MPLBACKEND", "Agg")

# Fixtures (or their dependencies) that are the session's quick book build.
BOOK_FIXTURES = {"quick_book", "quick_figures", "build", "served_book", "offline_book"}
# Modules whose tests share an expensive module-scoped fixture (or compile the same kernels): one unit, one worker.
# test_figures_heal.py: its re-execution test works on a private copy of the build, and only one
# worker waits for the quick build's figures step (the other goes on with tests that need no build).
MODULE_GROUPS = {"test_install.py", "test_reruns.py", "test_figures_heal.py",
                 "test_trained_heads.py", "test_published_data.py", "test_encoder.py",
                 # their first tests compile numba kernels (SAP d = 1, 2, 3; the hull; the grid):
                 # split over two workers, both compiled the same kernels at once (about 10 CPU-s each)
                 "test_fast_sap.py", "test_fast.py", "test_fast_midbeta.py"}
# Modules split into units by the module-scoped fixture their tests share (each unit makes its own
# copy of the module's cheap fixtures: a server on its own port, a Chromium): test name (or name
# with its parameters) -> unit; the module's other tests form one more unit. The browser checks
# are the longest chain after the book build, and as one unit they ran on one core while the
# other had nothing left to do.
SPLIT_MODULES = {
    "test_browser.py": {
        **dict.fromkeys(("test_no_figure_is_covered_by_a_sidebar", "test_one_search_and_the_title_in_view",
                         "test_every_figure_fits_its_column_on_a_desktop",
                         "test_no_page_scrolls_sideways_on_a_phone", "test_wide_equations_scroll_from_their_start",
                         "test_inline_formulas_fit_or_scroll",
                         "test_multi_panel_figures_are_stacked_on_a_phone",
                         "test_figure_and_animation_text_is_legible_at_every_width",
                         "test_a_quick_build_says_so_on_every_computed_page",
                         "test_references_are_author_year_sorted_and_without_tex",
                         "test_opened_code_cells_do_not_wrap", "test_every_page_renders_offline[file]",
                         "test_downloads_and_full_size_figures_load[file]",
                         # every page at 1280 px: the loads of the layouts' pass (the at_1280 fixture)
                         "test_no_sideways_scrolling_at_1280_px", "test_no_raw_markup_or_source_scaffolding",
                         "test_figures_are_legible_at_1280_px", "test_every_figure_caption_links_to_its_gallery_entry",
                         "test_math_and_figures_are_present_where_expected"), "layouts"),
        **dict.fromkeys(("test_unconfirmed_badge_opens_on_tap_and_on_keyboard_focus",), "badge"),
    },
}
# Queued first, in this order (module, or module::test prefix; "name.py::" for the library's doctests);
# everything else keeps its order. From ``pytest --durations``: the chain that decides the length of
# the run is the quick build's figures step, then the heal test that re-executes every notebook, so
# that test is queued early (its worker waits on the build's lock, leaving the cores to the build)
# and the other heavy tests fill the second worker meanwhile.
LONGEST_FIRST = (
    "test_install.py",
    "test_lab.py::test_chapter_runs_live_in_the_lab",
    "test_figures_heal.py::test_rm_rf",
    "test_figures_heal.py",
    "test_browser.py",
    "test_faults.py::test_interrupting_make_figures",
    "test_faults.py::test_interrupting_the_figure_writer",
    "test_determinism.py::test_two_figure",
    "test_lab.py::test_downloaded",
    "test_bench.py",
    "test_trained_heads.py",
    "trained_heads.py::",
    "test_reruns.py",
)


def _session_folder(config) -> "os.PathLike[str]":
    base = config._tmp_path_factory.getbasetemp()
    # an xdist worker's base folder is <the controller's>/popen-gwN: share the controller's
    return (base.parent if hasattr(config, "workerinput") else base) / "shared"


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    sessiondir.set_root(_session_folder(config))


def _rank(item) -> int:
    name = item.nodeid.split("/")[-1]
    for k, prefix in enumerate(LONGEST_FIRST):
        if name.startswith(prefix):
            return k
    return len(LONGEST_FIRST)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the units of ``MODULE_GROUPS``: a listed module's tests are one unit,
    every other test its own. (xdist's own ``xdist_group`` marks do not group under pytest 9,
    whose test ids xdist 3.8 can no longer suffix, so the units are named here, from the ids.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            module = path.rsplit("/", 1)[-1]
            if module in SPLIT_MODULES:
                test = nodeid.split("::", 1)[-1]            # with its parameters, else without
                units = SPLIT_MODULES[module]
                return f"{path}::{units.get(test, units.get(test.split('[', 1)[0], 'rest'))}"
            return path if module in MODULE_GROUPS else nodeid

    return ModuleUnits(config, log)


# The module-scoped fixture of each unit of a split module: a test that needs it outside its unit
# would make that unit compute it once more (test_browser's page_layouts: about 100 s).
UNIT_FIXTURES = {("test_browser.py", "layouts"): "page_layouts"}


def _check_units(items) -> None:
    for (module, unit), fixture in UNIT_FIXTURES.items():
        units = SPLIT_MODULES[module]
        stray = [item.nodeid for item in items if item.nodeid.split("::", 1)[0].endswith("/" + module)
                 and fixture in getattr(item, "fixturenames", ())
                 and units.get(item.name, units.get(item.name.split("[", 1)[0])) != unit]
        if stray:
            raise pytest.UsageError(f"{module}: these tests need {fixture} but are not in the unit {unit!r} of "
                                    f"SPLIT_MODULES (their unit would compute it again): {stray}")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    _check_units(items)
    items.sort(key=_rank)          # stable: the order inside each rank is the collection's


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    if any(BOOK_FIXTURES & set(getattr(item, "fixturenames", ())) for item in session.items):
        bookbuild.start_quick_book()


def pytest_sessionfinish(session, exitstatus):
    if exitstatus != pytest.ExitCode.INTERRUPTED:
        bookbuild.join_background()


@pytest.fixture(scope="session")
def quick_book():
    """The session's one ``make book PRESET=quick`` (``bookbuild.quick_book``), shared by every worker."""
    return bookbuild.quick_book()


@pytest.fixture(scope="session")
def quick_figures():
    """Its figures step, as soon as it is done (``bookbuild.quick_figures``; use a private copy)."""
    return bookbuild.quick_figures()


@pytest.fixture
def check_coincident_pick():
    """Check the law of one (SAP) step with two coincident tokens, as a function of (beta, N).

    Tokens ``[a, a, b]``: token 2 picks one of the two copies of ``a`` with probability
    ``2 e^{beta <b, a>} / (2 e^{beta <b, a>} + e^{beta <b, b>})`` (coincident indices add their
    weights); the frequency over ``N`` independent chains must lie within 5 binomial standard errors.
    """
    def check(beta: float, N: int, seed: int = 2):
        a, b = np.array([1.0, 0.0]), np.array([0.2, 0.9])
        x = np.array([a, a, b])
        _, J = D.sap_step(np.broadcast_to(x, (N, 3, 2)), 0.5, beta, rng=seed, return_choice=True)
        p_exact = 2 * np.exp(beta * b @ a) / (2 * np.exp(beta * b @ a) + np.exp(beta * b @ b))
        p_hat = np.isin(J[:, 2], [0, 1]).mean()
        assert abs(p_hat - p_exact) <= 5 * np.sqrt(p_exact * (1 - p_exact) / N)
    return check


@pytest.fixture
def neg_logs(monkeypatch):
    """The arguments of every ``bernoulli_from_neg_log`` call of the dense and the tiled samplers
    during the test (copies, in call order): the exact -log-probabilities with which they draw
    their Bernoulli events. The draws themselves are unchanged."""
    seen = []
    real = _sampling._bernoulli

    def spy(t, rng):
        seen.append(np.array(t, copy=True))
        return real(t, rng)

    # every draw goes through this one function: the dense steps' bernoulli_from_neg_log after its
    # checks, the tiled steps directly (their arguments are made by the library, once per tile)
    monkeypatch.setattr(_sampling, "_bernoulli", spy)
    return seen


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium per test module (the DevTools client of ``cdp.py``); fails, saying
    how to install it, when there is none."""
    exe = chromium_executable()
    if exe is None:
        pytest.fail(INSTALL_HINT)
    b = Browser(exe, tmp_path_factory.mktemp("chromium-profile"))
    try:
        b.send("Browser.getVersion", timeout=180)
        yield b
    finally:
        b.close()
