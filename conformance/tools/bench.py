"""`conformance bench`: what compile + static cache buys at decode time, per model.

Contract of `main(argv) -> int`: for each selected model, measure with
batch 1 and greedy tokens

* ``prefill_seconds``: one eager multimodal prefill forward (the sample's
  media included) with a dynamic cache;
* ``eager_tokens_per_s``: decode steps of the eager model over a
  ``DynamicCache``;
* ``compiled_tokens_per_s``: decode steps of ``torch.compile(model)`` over a
  ``StaticCache`` (mode ``reduce-overhead`` on cuda: CUDA graphs; the default
  mode on cpu), after warm-up; ``compile_seconds`` is the warm-up's wall
  time beyond two eager steps; ``speedup`` = compiled / eager;
* ``peak_memory_mib``: peak CUDA memory allocated on cuda; on cpu, the
  process's peak resident memory (a ceiling, shared by everything the
  process did before);

and a sweep over the number of image tokens: the prompt is that many image
feature vectors (random, in place of what the vision tower would emit) then
the sample's text, so the decoder sees a cache as long as a real image
would make it; each point records both decode rates and the speedup.

Sizes: ``--sizes tiny`` (default on cpu) builds the suite's tiny models;
``--sizes real`` (default on cuda) builds realistically sized models from
the shapes in ``fixtures/bench/shapes.json`` (default config sizes of the
named checkpoints, weights random, in ``--dtype``, bfloat16 by default on
cuda). Outputs ``<out>.json``, ``<out>.md`` and ``<out>.png``. Timings are
medians over ``--repeats``; nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from conformance import locations

SCHEMA = "vlm-conformance-bench/1"
SHAPES = locations.BENCH_SHAPES
DEFAULT_CPU_MODELS = "LlavaForConditionalGeneration,PaliGemmaForConditionalGeneration"
CPU_SWEEP = (16, 64, 256)
GPU_SWEEP = (64, 256, 576, 1152, 2304)


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


def build(name: str, sizes: str, device: str, dtype: torch.dtype):
    """(model, sample inputs, source) for one class, tiny (built as the suite builds it) or realistic."""
    from conformance.build.case import build_case
    from conformance.discover import by_name

    index = by_name()
    if sizes == "real":
        shapes = load_shapes()
        if name not in shapes:
            raise BenchError(f"--models: {name!r} has no entry in {SHAPES.name}; known: {', '.join(shapes)}")
        entry = shapes[name]
        info = index[entry["class"]]
        config = info.config_class.from_dict(entry["config"])
        torch.manual_seed(0)
        with torch.device(device):
            model = info.model_class(config).to(dtype).eval()
        return model, real_sample(model, device, dtype), f"shapes:{entry['like']}"
    if name not in index:
        raise BenchError(f"--models: no discovered class {name!r}; see `conformance list`")
    case = build_case(index[name], device, dtype, "eager")
    return case.fresh_model(), case.inputs(), case.tiny.source


def real_sample(model, device: str, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """One prompt for a realistically sized model: an image of the tower's size, as many
    placeholders as its encoder emits, text on both sides."""
    from conformance.build.configs import placeholder_id
    from conformance.checks.common.generation import image_features

    vision = model.config.vision_config
    gen = torch.Generator(device="cpu").manual_seed(0)
    pixels = torch.randn(1, vision.num_channels, vision.image_size, vision.image_size, generator=gen).to(device, dtype)
    with torch.no_grad():
        count = image_features(model.get_image_features(pixel_values=pixels)).shape[0]
    text = torch.randint(10, 1000, (9,), generator=gen)
    ids = torch.cat([text[:5], torch.full((count,), placeholder_id(model.config)), text[5:]]).view(1, -1).to(device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "pixel_values": pixels}


def select(models: str, sizes: str) -> list[str]:
    from conformance.discover import class_index, select_classes

    if sizes == "real":
        names = list(load_shapes())
        index = {n: n for n in names}
    else:
        index = class_index()
        names = sorted(set(index.values()))
    patterns = [p.strip() for p in models.split(",") if p.strip()]
    try:
        return select_classes(patterns, index, names) if patterns else []
    except LookupError as exc:
        raise BenchError(f"--models: nothing matches {exc.args[0]!r}") from None


# --- timing -------------------------------------------------------------------------------------------


class Clock:
    def __init__(self, device: str):
        self.cuda = device.startswith("cuda")

    def now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
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


def measure_decode(model, embeds: torch.Tensor, new_tokens: int, repeats: int, backend: str,
                   mode: str | None, clock: Clock) -> tuple[float, float, float]:
    """(eager tokens/s, compiled tokens/s, compile seconds) from a prefill over `embeds`."""
    from transformers.cache_utils import DynamicCache

    from conformance.build.configs import text_config
    from conformance.checks.common.cache import static_cache

    owner, kwarg = _owner_and_kwarg(model)
    max_len = embeds.shape[1] + new_tokens * (repeats + 2) + 2

    def eager_run() -> float:
        cache = DynamicCache(config=text_config(owner.config))
        first = _last_logits(owner(inputs_embeds=embeds, use_cache=True, **{kwarg: cache})).argmax(-1, keepdim=True)
        return decode_rate(lambda t: _last_logits(owner(input_ids=t, use_cache=True, **{kwarg: cache})),
                           first, new_tokens, clock)

    with torch.no_grad():
        eager = statistics.median(eager_run() for _ in range(repeats))
        cache = static_cache(owner, max_len, batch_size=1)
        first = _last_logits(owner(inputs_embeds=embeds, use_cache=True, **{kwarg: cache})).argmax(-1, keepdim=True)
        compiled = torch.compile(owner, backend=backend, mode=mode, fullgraph=False)

        def step(token):
            return _last_logits(compiled(input_ids=token, use_cache=True, **{kwarg: cache})).clone()

        started = clock.now()
        token = first
        for _ in range(3):  # compile, then the cudagraph recording runs
            token = step(token).argmax(-1, keepdim=True)
        compile_seconds = max(clock.now() - started - 3.0 / max(eager, 1e-9), 0.0)
        rates = []
        for _ in range(repeats):
            rates.append(decode_rate(step, token, new_tokens, clock))
        compiled_rate = statistics.median(rates)
    torch._dynamo.reset()
    return eager, compiled_rate, compile_seconds


def peak_memory_mib(device: str) -> float:
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def bench_model(name: str, args, device: str, dtype: torch.dtype, clock: Clock) -> ModelResult:
    model, inputs, source = build(name, args.sizes, device, dtype)
    result = ModelResult(model=name, parameters=sum(p.numel() for p in model.parameters()), source=source)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    owner, _ = _owner_and_kwarg(model)
    with torch.no_grad():
        times = []
        for _ in range(args.repeats):
            started = clock.now()
            model(**inputs)
            times.append(clock.now() - started)
    result.prefill_seconds = statistics.median(times)
    result.prefill_tokens = int(inputs["input_ids"].shape[1])
    mode = "reduce-overhead" if device.startswith("cuda") and args.backend == "inductor" else None
    ids, mask = inputs["input_ids"][-1], inputs["attention_mask"][-1]
    from conformance.build.configs import placeholder_id

    text = ids[(mask == 1) & (ids != placeholder_id(model.config))][-8:].view(1, -1)  # the prompt's own text
    for index, image_tokens in enumerate(args.image_tokens):
        with torch.no_grad():
            embeds = _prompt_embeds(owner, text, image_tokens, device, dtype)
        eager, compiled, compile_seconds = measure_decode(model, embeds, args.new_tokens, args.repeats,
                                                          args.backend, mode, clock)
        result.sweep.append(Point(image_tokens, int(embeds.shape[1]), round(eager, 2), round(compiled, 2),
                                  round(compiled / eager, 3)))
        if index == 0:
            result.eager_tokens_per_s, result.compiled_tokens_per_s = round(eager, 2), round(compiled, 2)
            result.speedup, result.compile_seconds = round(compiled / eager, 3), round(compile_seconds, 2)
    result.peak_memory_mib = round(peak_memory_mib(device), 1)
    result.prefill_seconds = round(result.prefill_seconds, 4)
    return result


# --- outputs ------------------------------------------------------------------------------------------


def environment(device: str, dtype: torch.dtype, args) -> dict[str, Any]:
    import transformers

    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else platform.processor() or platform.machine()
    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "device": device, "device_name": name, "dtype": str(dtype).removeprefix("torch."),
            "backend": args.backend, "mode": "reduce-overhead" if device.startswith("cuda") and args.backend == "inductor" else "default",
            "threads": torch.get_num_threads(), "sizes": args.sizes, "new_tokens": args.new_tokens,
            "repeats": args.repeats}


def envelope(results: list[ModelResult], env: dict) -> dict:
    return {"schema": SCHEMA, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "environment": env, "models": [asdict(r) for r in results]}


def markdown(report: dict) -> str:
    env = report["environment"]
    lines = [
        f"# Decode speed: eager + dynamic cache vs compiled + static cache ({env['device']}, {env['dtype']})",
        "",
        f"torch {env['torch']}, transformers {env['transformers']}, backend `{env['backend']}` mode `{env['mode']}`, "
        f"{env['threads']} thread(s), sizes `{env['sizes']}`, {env['new_tokens']} new tokens, median of {env['repeats']}.",
        "",
        "| model | params | prefill s | eager tok/s | compiled tok/s | speedup | compile s | peak MiB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for m in report["models"]:
        if m["error"]:
            lines.append(f"| {m['model']} | | | | | error: {m['error']} | | |")
            continue
        lines.append(f"| {m['model']} | {m['parameters']:,} | {m['prefill_seconds']:.4f} | {m['eager_tokens_per_s']:.1f} | "
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
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(report: dict, out: Path) -> list[Path]:
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.with_suffix(".json"), out.with_suffix(".md"), out.with_suffix(".png")]
    paths[0].write_text(json.dumps(report, indent=2) + "\n")
    paths[1].write_text(markdown(report))
    plot(report, paths[2])
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
    p = argparse.ArgumentParser(prog="conformance bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="", help=f"class names or globs (cpu default: {DEFAULT_CPU_MODELS})")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    p.add_argument("--dtype", default="", choices=["", "float32", "bfloat16", "float16"],
                   help="default float32 on cpu, bfloat16 on cuda")
    p.add_argument("--sizes", default="", choices=["", "tiny", "real"], help="default tiny on cpu, real on cuda")
    p.add_argument("--backend", default="inductor", help="dynamo backend of the compiled side")
    p.add_argument("--image-tokens", type=_counts, default=None, help="sweep points, e.g. 64,256,2304")
    p.add_argument("--new-tokens", type=int, default=32, help="decode steps timed per run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's)")
    p.add_argument("--out", default="reports/bench-cpu", help="output path without suffix (.json .md .png)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
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
    results = []
    try:
        names = select(args.models or ("*" if args.sizes == "real" else DEFAULT_CPU_MODELS), args.sizes)
        for name in names:
            try:
                results.append(bench_model(name, args, device, dtype, clock))
            except BenchError:
                raise
            except Exception as exc:  # one model failing is a row, not the end of the run
                from conformance.reasons import one_line

                results.append(ModelResult(model=name, parameters=0, source="", error=one_line(exc, 160)))
            print(f"conformance bench: {name}: done", file=sys.stderr)
    except BenchError as exc:
        print(f"conformance bench: {exc}", file=sys.stderr)
        return 2
    report = envelope(results, environment(device, dtype, args))
    for path in write_outputs(report, Path(args.out)):
        print(f"conformance bench: wrote {path}", file=sys.stderr)
    return 0 if all(not r.error for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
