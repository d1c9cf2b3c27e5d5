"""`conformance bench`: what compile + static cache buys at decode time, per model.

(``conformance bench --suite RUN.json [EARLIER.json]`` is another question,
what the matrix itself costs per check: `conformance.tools.suite_cost`.)

Contract of `main(argv) -> int`: for each selected model, measure with
batch 1 and greedy tokens

* ``prefill_seconds``: one eager multimodal prefill forward (the sample's
  media included) with a dynamic cache;
* ``eager_tokens_per_s``: decode steps of the eager model over a
  ``DynamicCache``;
* ``compiled_tokens_per_s``: decode steps of ``torch.compile(model)`` over a
  ``StaticCache`` (mode ``reduce-overhead`` on cuda: CUDA graphs; the default
  mode on cpu), after warm-up; ``compile_seconds`` is the warm-up's wall
  time beyond three eager steps; ``speedup`` = compiled / eager;
* ``peak_memory_mib``: peak CUDA memory allocated on the device on cuda; on
  cpu, the process's peak resident memory (a ceiling, shared by everything
  the process did before);

and a sweep over the number of image tokens: the prompt is that many image
feature vectors (random, in place of what the vision tower would emit) then
the sample's text, so the decoder sees a cache as long as a real image
would make it; each point records both decode rates and the speedup. The
model is compiled once, with one StaticCache sized for the longest point
and reset between points (as a server with a fixed maximum length runs):
one compile and one set of CUDA graphs per model, not one per point.

Sizes: ``--sizes tiny`` (default on cpu) builds the suite's tiny models;
``--sizes real`` (default on cuda) builds realistically sized models from
the shapes in ``fixtures/bench/shapes.json`` (default config sizes of the
named checkpoints, weights random, in ``--dtype``, bfloat16 by default on
cuda; ``--shapes`` names another file of that form). Outputs ``<out>.json``,
``<out>.md`` and ``<out>.png``, rewritten after every sweep point, so that
a run stopped early (Ctrl-C, a time limit's SIGINT) keeps what it measured:
the envelope's ``planned`` lists the models and points asked for and
``complete`` says whether all were measured; an interrupted model's row
says so in ``error``. Timings are medians over ``--repeats``; nothing here
asserts a timing.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import resource
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from conformance import locations
from conformance.reasons import one_line
from conformance.report import io
from conformance.tools.errors import CliError, CommandParser

SCHEMA = "vlm-conformance-bench/1"
SHAPES = locations.BENCH_SHAPES
DEFAULT_CPU_MODELS = "LlavaForConditionalGeneration,PaliGemmaForConditionalGeneration"
CPU_SWEEP = (16, 64, 256)
GPU_SWEEP = (64, 256, 576, 1152, 2304)
WARMUP_STEPS = 3  # compiled steps before timing: the compile, then the CUDA graph recording runs


class BenchError(Exception):
    """A bad option or input: one line naming it and the fix."""


@dataclass
class Point:
    image_tokens: int
    context: int
    eager_tokens_per_s: float
    compiled_tokens_per_s: float
    speedup: float


@dataclass
class ModelResult:
    model: str
    parameters: int
    source: str
    prefill_seconds: float = 0.0
    prefill_tokens: int = 0
    eager_tokens_per_s: float = 0.0
    compiled_tokens_per_s: float = 0.0
    speedup: float = 0.0
    compile_seconds: float = 0.0
    peak_memory_mib: float = 0.0
    sweep: list[Point] = field(default_factory=list)
    error: str = ""


# --- building ---------------------------------------------------------------------------------------


def load_shapes(path: Path = SHAPES) -> dict[str, dict]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise BenchError(f"{path}: no such file; --sizes real needs the shapes fixture") from None
    except json.JSONDecodeError as exc:
        raise BenchError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); fix the file") from None
    return data["models"]


def build(name: str, sizes: str, device: str, dtype: torch.dtype, shapes_path: Path = SHAPES):
    """(model, sample inputs, source) for one class, tiny (built as the suite builds it) or realistic."""
    if sizes == "real":
        import transformers

        shapes = load_shapes(shapes_path)
        if name not in shapes:
            raise BenchError(f"--models: {name!r} has no entry in {shapes_path.name}; known: {', '.join(shapes)}")
        entry = shapes[name]
        # The class by name, not through discovery (which imports every model module: seconds for nothing here).
        model_class = getattr(transformers, entry["class"], None)
        if model_class is None:
            raise BenchError(f"{shapes_path.name}: {name}: transformers {transformers.__version__} has no class "
                             f"{entry['class']!r}; fix the entry or install the transformers it was written for")
        config = model_class.config_class.from_dict(entry["config"])
        torch.manual_seed(0)
        with torch.device(device):
            model = model_class(config).to(dtype).eval()
        return model, real_sample(model, device, dtype), f"shapes:{entry['like']}"
    from conformance.cases.case import build_case
    from conformance.discover import by_name

    index = by_name()
    if name not in index:
        raise BenchError(f"--models: no discovered class {name!r}; see `conformance list`")
    case = build_case(index[name], device, dtype, "eager")
    return case.fresh_model(), case.inputs(), case.tiny.source


def real_sample(model, device: str, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """One prompt for a realistically sized model: an image of the tower's size, as many
    placeholders as its encoder emits, text on both sides."""
    from conformance.cases.configs import placeholder_id
    from conformance.checks.common.generation import image_features

    vision = model.config.vision_config
    gen = torch.Generator(device="cpu").manual_seed(0)
    pixels = torch.randn(1, vision.num_channels, vision.image_size, vision.image_size, generator=gen).to(device, dtype)
    with torch.no_grad():
        count = image_features(model.get_image_features(pixel_values=pixels)).shape[0]
    text = torch.randint(10, 1000, (9,), generator=gen)
    ids = torch.cat([text[:5], torch.full((count,), placeholder_id(model.config)), text[5:]]).view(1, -1).to(device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "pixel_values": pixels}


def select(models: str, sizes: str, shapes_path: Path = SHAPES) -> list[str]:
    from conformance.discover import NoMatch, class_index, model_types, select_classes

    patterns = [p.strip() for p in models.split(",") if p.strip()]
    if sizes == "real":
        names = list(load_shapes(shapes_path))
        index, types = {n: n for n in names}, {}
    else:
        index = class_index()
        names = sorted(set(index.values()))
        types = model_types() if patterns else {}
    try:
        return select_classes(patterns, index, names, types) if patterns else []
    except NoMatch as exc:
        raise BenchError(f"--models: {exc}") from None
    except LookupError as exc:
        raise BenchError(f"--models: nothing matches {exc.args[0]!r}") from None


# --- timing -------------------------------------------------------------------------------------------


class Clock:
    """Wall time after the bench's device (not merely the current one) has finished its queued work."""

    def __init__(self, device: str):
        self.cuda = torch.device(device) if device.startswith("cuda") else None

    def now(self) -> float:
        if self.cuda is not None:
            torch.cuda.synchronize(self.cuda)
        return time.perf_counter()


def decode_rate(step, first_token: torch.Tensor, tokens: int, clock: Clock) -> float:
    """Tokens per second of `tokens` greedy steps of `step(token) -> logits`."""
    token = first_token
    started = clock.now()
    for _ in range(tokens):
        token = step(token).argmax(-1, keepdim=True)
    return tokens / max(clock.now() - started, 1e-9)


def _owner_and_kwarg(model):
    from conformance.checks.common.cache import cache_kwarg
    from conformance.checks.common.generation import generation_owner

    owner = generation_owner(model)
    return owner, cache_kwarg(owner)


def _last_logits(output) -> torch.Tensor:
    from conformance.checks.common.compare import logits_of

    return logits_of(output)[:, -1, :]


def _prompt_embeds(owner, text: torch.Tensor, image_tokens: int, device, dtype) -> torch.Tensor:
    """`image_tokens` random feature vectors followed by the embedded `text` ids [1, n]."""
    embeds = owner.get_input_embeddings()(text)
    gen = torch.Generator(device="cpu").manual_seed(0)
    scale = float(embeds.float().std()) or 1.0
    image = (torch.randn(1, image_tokens, embeds.shape[-1], generator=gen) * scale).to(device, dtype)
    return torch.cat([image, embeds], dim=1)


def eager_decode_rate(owner, kwarg: str, embeds: torch.Tensor, new_tokens: int, repeats: int, clock: Clock) -> float:
    """Median tokens/s of the eager model decoding over a fresh DynamicCache after a prefill over `embeds`."""
    from transformers.cache_utils import DynamicCache

    from conformance.cases.configs import text_config

    def run(tokens: int) -> float:
        cache = DynamicCache(config=text_config(owner.config))
        first = _last_logits(owner(inputs_embeds=embeds, use_cache=True, **{kwarg: cache})).argmax(-1, keepdim=True)
        return decode_rate(lambda t: _last_logits(owner(input_ids=t, use_cache=True, **{kwarg: cache})),
                           first, tokens, clock)

    run(2)  # warm-up: the decode shapes' first kernels (cuBLAS heuristics, lazy loading) are not timed
    return statistics.median(run(new_tokens) for _ in range(repeats))


class CompiledDecoder:
    """`torch.compile(owner)` decoding over one StaticCache of `max_len`, reused by every sweep point.

    One compile (and, with ``reduce-overhead``, one set of CUDA graphs) per model: the cache keeps its tensors
    (static addresses) and is reset in place between points, so no point recompiles.
    """

    def __init__(self, owner, kwarg: str, max_len: int, backend: str, mode: str | None):
        from conformance.checks.common.cache import static_cache

        self.owner, self.kwarg, self.mode = owner, kwarg, mode
        self.cache = static_cache(owner, max_len, batch_size=1)
        self.compiled = torch.compile(owner, backend=backend, mode=mode, fullgraph=False)
        self.compiled_once = False

    def step(self, token: torch.Tensor) -> torch.Tensor:
        if self.mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()  # each call is a new step: earlier outputs may be reused
        # clone: with CUDA graphs the output lives in the graph's memory, overwritten by the next replay
        return _last_logits(self.compiled(input_ids=token, use_cache=True, **{self.kwarg: self.cache})).clone()

    def rate(self, embeds: torch.Tensor, new_tokens: int, repeats: int, eager_rate: float,
             clock: Clock) -> tuple[float, float]:
        """(median compiled tokens/s, compile seconds) after an eager prefill over `embeds` into the reset cache;
        compile seconds: the warm-up's time beyond as many eager steps, 0.0 once the model is compiled."""
        self.cache.reset()
        first = _last_logits(self.owner(inputs_embeds=embeds, use_cache=True, **{self.kwarg: self.cache}))
        token = first.argmax(-1, keepdim=True)
        started = clock.now()
        for _ in range(WARMUP_STEPS):
            token = self.step(token).argmax(-1, keepdim=True)
        warmup = clock.now() - started
        compile_seconds = 0.0 if self.compiled_once else max(warmup - WARMUP_STEPS / max(eager_rate, 1e-9), 0.0)
        self.compiled_once = True
        rates = [decode_rate(self.step, token, new_tokens, clock) for _ in range(repeats)]
        return statistics.median(rates), compile_seconds


def cache_length(context: int, new_tokens: int, repeats: int) -> int:
    """Static cache length for a prompt of `context` tokens: the prefill, the warm-up and every timed run."""
    return context + WARMUP_STEPS + new_tokens * repeats + 2


def peak_memory_mib(device: str) -> float:
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated(torch.device(device)) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def compile_mode(device: str, backend: str) -> str | None:
    return "reduce-overhead" if device.startswith("cuda") and backend == "inductor" else None


def bench_model(name: str, args, device: str, dtype: torch.dtype, clock: Clock,
                progress: Callable[[ModelResult], None] = lambda result: None) -> ModelResult:
    """Measure one model (see the module); `progress(result)` is called once the model is built and after every
    sweep point, with the result measured so far."""
    model, inputs, source = build(name, args.sizes, device, dtype, args.shapes)
    result = ModelResult(model=name, parameters=sum(p.numel() for p in model.parameters()), source=source)
    progress(result)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(torch.device(device))
    owner, kwarg = _owner_and_kwarg(model)
    with torch.no_grad():
        times = []
        for _ in range(args.repeats):
            started = clock.now()
            model(**inputs)
            times.append(clock.now() - started)
    result.prefill_seconds = round(statistics.median(times), 4)
    result.prefill_tokens = int(inputs["input_ids"].shape[1])
    ids, mask = inputs["input_ids"][-1], inputs["attention_mask"][-1]
    from conformance.cases.configs import placeholder_id

    text = ids[(mask == 1) & (ids != placeholder_id(model.config))][-8:].view(1, -1)  # the prompt's own text
    longest = cache_length(max(args.image_tokens) + text.shape[1], args.new_tokens, args.repeats)
    with torch.no_grad():
        decoder = CompiledDecoder(owner, kwarg, longest, args.backend, compile_mode(device, args.backend))
        for index, image_tokens in enumerate(args.image_tokens):
            embeds = _prompt_embeds(owner, text, image_tokens, device, dtype)
            eager = eager_decode_rate(owner, kwarg, embeds, args.new_tokens, args.repeats, clock)
            compiled, compile_seconds = decoder.rate(embeds, args.new_tokens, args.repeats, eager, clock)
            result.sweep.append(Point(image_tokens, int(embeds.shape[1]), round(eager, 2), round(compiled, 2),
                                      round(compiled / eager, 3)))
            if index == 0:
                result.eager_tokens_per_s, result.compiled_tokens_per_s = round(eager, 2), round(compiled, 2)
                result.speedup, result.compile_seconds = round(compiled / eager, 3), round(compile_seconds, 2)
            result.peak_memory_mib = round(peak_memory_mib(device), 1)
            progress(result)
    return result


def release(device: str) -> None:
    """After a model (and every reference to it) is gone: drop compiled code, CUDA graphs and cached blocks, so
    that the next model's peak memory is its own."""
    torch._dynamo.reset()
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


# --- outputs ------------------------------------------------------------------------------------------


def environment(device: str, dtype: torch.dtype, args) -> dict[str, Any]:
    import transformers

    gpu = device.startswith("cuda")
    name = torch.cuda.get_device_name(torch.device(device)) if gpu else platform.processor() or platform.machine()
    env = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
           "device": device, "device_name": name, "dtype": str(dtype).removeprefix("torch."),
           "backend": args.backend, "mode": compile_mode(device, args.backend) or "default",
           "threads": torch.get_num_threads(), "sizes": args.sizes, "new_tokens": args.new_tokens,
           "repeats": args.repeats}
    if gpu:
        env["cuda"] = torch.version.cuda
    if args.sizes == "real":
        env["shapes"] = locations.shown(args.shapes)
    return env


def envelope(results: list[ModelResult], env: dict, planned: dict | None = None) -> dict:
    """The report. With `planned` ({"models": [...], "image_tokens": [...]}, what was asked for) it also holds
    `unmeasured` (what of the plan it lacks, one line each: a model not started, the points a model lacks) and
    `complete` (nothing lacks)."""
    models = [asdict(r) for r in results]
    report = {"schema": SCHEMA, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "environment": env, "models": models}
    if planned is not None:
        report["planned"] = planned
        report["unmeasured"] = unmeasured(models, planned)
        report["complete"] = not report["unmeasured"]
    return report


def unmeasured(models: list[dict], planned: dict) -> list[str]:
    """What the plan asked for and `models` (the report's rows) lack: whole models, or the sweep points a model
    lacks (a model that failed lacks all of them)."""
    rows = {m["model"]: m for m in models}
    missing = []
    for name in planned["models"]:
        row = rows.get(name)
        if row is None:
            missing.append(f"{name}: not started")
            continue
        measured = {p["image_tokens"] for p in row["sweep"]}
        points = [str(n) for n in planned["image_tokens"] if n not in measured]
        if points:
            missing.append(f"{name}: {','.join(points)} image tokens")
    return missing


def markdown(report: dict) -> str:
    env = report["environment"]
    lines = [
        f"# Decode speed: eager + dynamic cache vs compiled + static cache ({env['device']}, {env['dtype']})",
        "",
        f"torch {env['torch']}, transformers {env['transformers']}, backend `{env['backend']}` mode `{env['mode']}`, "
        f"{env['threads']} thread(s), sizes `{env['sizes']}`, {env['new_tokens']} new tokens, median of {env['repeats']}.",
        "",
    ]
    if report.get("unmeasured"):
        lines += [f"**Incomplete run**, not measured: {'; '.join(report['unmeasured'])}.", ""]
    lines += [
        "| model | params | prefill s | eager tok/s | compiled tok/s | speedup | compile s | peak MiB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for m in report["models"]:
        if m["error"] and not m["sweep"]:
            lines.append(f"| {m['model']} | | | | | error: {m['error']} | | |")
            continue
        name = f"{m['model']} ({m['error']})" if m["error"] else m["model"]  # e.g. interrupted after some points
        lines.append(f"| {name} | {m['parameters']:,} | {m['prefill_seconds']:.4f} | {m['eager_tokens_per_s']:.1f} | "
                     f"{m['compiled_tokens_per_s']:.1f} | {m['speedup']:.2f}x | {m['compile_seconds']:.1f} | {m['peak_memory_mib']:.0f} |")
    lines += ["", "## Sweep over image tokens (speedup = compiled / eager decode tokens/s)", "",
              "| model | image tokens | context | eager tok/s | compiled tok/s | speedup |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for m in report["models"]:
        for p in m["sweep"]:
            lines.append(f"| {m['model']} | {p['image_tokens']} | {p['context']} | {p['eager_tokens_per_s']:.1f} | "
                         f"{p['compiled_tokens_per_s']:.1f} | {p['speedup']:.2f}x |")
    return "\n".join(lines) + "\n"


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for m in report["models"]:
        if m["sweep"]:
            ax.plot([p["image_tokens"] for p in m["sweep"]], [p["speedup"] for p in m["sweep"]], marker="o",
                    label=m["model"].removesuffix("ForConditionalGeneration"))
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("image tokens in the prompt")
    ax.set_ylabel("decode speedup (compiled static / eager dynamic)")
    env = report["environment"]
    ax.set_title(f"{env['device']} {env['dtype']} {env['sizes']} models, {env['backend']}")
    if any(m["sweep"] for m in report["models"]):  # a legend of no lines warns
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(report: dict, out: Path) -> list[Path]:
    """`<out>.json`, `<out>.md`, `<out>.png`, each replaced whole (a reader never sees half a file)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.with_suffix(".json"), out.with_suffix(".md"), out.with_suffix(".png")]
    io.write_texts_atomic({paths[0]: json.dumps(report, indent=2) + "\n", paths[1]: markdown(report)})
    staged = paths[2].with_name(f".{paths[2].name}.tmp.png")
    plot(report, staged)
    staged.replace(paths[2])
    return paths


# --- command line -------------------------------------------------------------------------------------


def _counts(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers, e.g. 16,64,256") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one positive count, e.g. 16,64,256")
    return values


def parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="conformance bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="",
                   help=f"class names, model types or globs, any case (cpu default: {DEFAULT_CPU_MODELS})")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    p.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"],
                   help="default float32 on cpu, bfloat16 on cuda")
    p.add_argument("--sizes", default=None, choices=["tiny", "real"], help="default tiny on cpu, real on cuda")
    p.add_argument("--backend", default="inductor", help="dynamo backend of the compiled side")
    p.add_argument("--image-tokens", type=_counts, default=None, help="sweep points, e.g. 64,256,2304")
    p.add_argument("--new-tokens", type=int, default=32, help="decode steps timed per run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's)")
    p.add_argument("--shapes", type=Path, default=SHAPES,
                   help="the realistic shapes of --sizes real (default: the package's bench/shapes.json)")
    p.add_argument("--out", default="reports/bench-cpu", help="output path without suffix (.json .md .png)")
    p.add_argument("--suite", nargs="+", metavar="RUN.json", help="another question: what the matrix itself costs "
                   "per check, from a run's pytest-json-report (RUN.json [EARLIER.json]: the change since); "
                   "`conformance bench --suite --help` for its options (conformance.tools.suite_cost)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--suite" in argv:  # the matrix's own cost per check: conformance.tools.suite_cost
        from conformance.tools import suite_cost

        argv.remove("--suite")
        return suite_cost.main(argv)
    try:
        args = parser().parse_args(argv)
    except CliError as exc:
        print(f"conformance bench: {exc}", file=sys.stderr)
        return 2
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        print(f"conformance bench: --device {device}: no CUDA device here; use --device cpu", file=sys.stderr)
        return 2
    gpu = device.startswith("cuda")
    args.sizes = args.sizes or ("real" if gpu else "tiny")
    dtype = getattr(torch, args.dtype or ("bfloat16" if gpu else "float32"))
    args.image_tokens = args.image_tokens or (GPU_SWEEP if gpu else CPU_SWEEP)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.new_tokens < 1 or args.repeats < 1:
        print("conformance bench: --new-tokens and --repeats must be at least 1", file=sys.stderr)
        return 2
    clock = Clock(device)
    try:
        names = select(args.models or ("*" if args.sizes == "real" else DEFAULT_CPU_MODELS), args.sizes, args.shapes)
    except BenchError as exc:
        print(f"conformance bench: {exc}", file=sys.stderr)
        return 2
    env = environment(device, dtype, args)
    planned = {"models": names, "image_tokens": list(args.image_tokens)}
    out = Path(args.out)
    results: list[ModelResult] = []
    name = ""

    def progress(result: ModelResult) -> None:
        if not results or results[-1] is not result:
            results.append(result)
        write_outputs(envelope(results, env, planned), out)

    try:
        for name in names:
            try:
                bench_model(name, args, device, dtype, clock, progress)
            except BenchError as exc:
                print(f"conformance bench: {exc}", file=sys.stderr)
                return 2
            except Exception as exc:  # one model failing is a row, not the end of the run
                error = one_line(exc, 160)
                if results and results[-1].model == name:  # built, then failed: keep what it measured
                    results[-1].error = error
                else:
                    results.append(ModelResult(model=name, parameters=0, source="", error=error))
            release(device)
            print(f"conformance bench: {name}: done", file=sys.stderr)
    except KeyboardInterrupt:  # Ctrl-C or a time limit's SIGINT: keep what was measured, say what was not
        current = results[-1] if results and results[-1].model == name else None
        if current and not current.error and len(current.sweep) < len(args.image_tokens):
            current.error = f"interrupted after {len(current.sweep)} of {len(args.image_tokens)} sweep points"
        report = envelope(results, env, planned)
        write_outputs(report, out)
        print(f"conformance bench: interrupted; wrote {out}.json with what was measured; not measured: "
              f"{'; '.join(report['unmeasured']) or 'nothing'}", file=sys.stderr)
        return 130
    report = envelope(results, env, planned)
    for path in write_outputs(report, out):
        print(f"conformance bench: wrote {path}", file=sys.stderr)
    return 0 if all(not r.error for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
