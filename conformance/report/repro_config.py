"""A reproducer's config as a constructor call of only the fields that differ from the class's defaults.

Contracts:

* `config_source(config)` is (source, classes, fallback): `source` an expression building a config equal to
  `config`, as ``LlavaConfig(text_config=LlamaConfig(hidden_size=16, ...), ...)``: per config class the keyword
  arguments of the fields whose value differs from that class's default instance, recursively for sub-configs
  (a sub-config equal to the parent's default one is left out), each value a literal, the arguments flowed
  from the opening parenthesis to `repro_values.WIDTH` columns; `classes` the config classes it names (the script imports them).
  A field holding named entries that are dicts (rope parameters per layer type) is written with its names sorted
  (`named_in_order`), so the text is the same in every process.
* It is checked when written: the expression is evaluated and its ``to_dict()`` must equal the config's, both
  without `DROPPED` (the version that wrote it and the checkpoint's names). A field that the constructor derives
  otherwise than the original has it is then written explicitly too (at most `ROUNDS` times). When that still
  differs, or a class cannot build its default instance, `fallback` says why and `source` is
  ``<Class>.from_dict({...every field...})``, as the scripts always had it.
"""

from __future__ import annotations

from conformance.report.repro_values import WIDTH, literal

DROPPED = ("transformers_version", "architectures", "_name_or_path")
ROUNDS = 3


class _Differs(Exception):
    pass


def _plain(config) -> dict:
    data = config.to_dict()
    for key in DROPPED:
        data.pop(key, None)
    return data


def _is_config(value) -> bool:
    from transformers import PretrainedConfig

    return isinstance(value, PretrainedConfig)


def _call(config, forced: dict[tuple, set], path: tuple, classes: set, indent: int, lead: int = 0) -> str:
    """`Class(key=value, ...)` of the fields of `config` that differ from `Class()`'s, and those `forced` names."""
    cls = type(config)
    classes.add(cls)
    try:
        defaults = _plain(cls())
    except Exception as exc:  # a class that cannot build its own default instance: no diff to take
        raise _Differs(f"{cls.__name__}() cannot be built ({type(exc).__name__}: {exc})") from None
    data = _plain(config)
    items = []
    for key, value in data.items():
        sub = getattr(config, key, None)
        if _is_config(sub) and isinstance(value, dict):
            if value == defaults.get(key) and key not in forced.get(path, ()):
                continue
            items.append(f"{key}={_call(sub, forced, path + (key,), classes, indent + 4, len(key) + 1)}")
        elif key in forced.get(path, ()) or key not in defaults or defaults[key] != value:
            if not key.isidentifier():
                raise _Differs(f"{cls.__name__} field {key!r} is not a keyword")
            items.append(f"{key}={literal(named_in_order(value), indent + 4, key)}")
    flat = f"{cls.__name__}({', '.join(items)})"
    if len(flat) + indent + lead <= WIDTH and "\n" not in flat:
        return flat
    return _flowed(f"{cls.__name__}(", items, indent, lead)


def named_in_order(value):
    """A dict of named entries that are dicts themselves (rope parameters per layer type), its names sorted:
    transformers may build it from a set, whose order changes from one process to the next, and a script's
    text must not. Anything else as it is."""
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()) \
            and all(isinstance(k, str) for k in value):
        return dict(sorted(value.items()))
    return value


def _flowed(opening: str, items: list[str], indent: int, lead: int) -> str:
    """``Class(a=1, b=2,`` then as many items a line as fit, the closing parenthesis on the last line: the
    first items on the opening line, an item spanning lines (a sub-config) on lines of its own."""
    lines = [opening]
    width = WIDTH - indent - lead  # what the opening line has left
    for item in items:
        last = lines[-1]
        room = width if len(lines) == 1 else WIDTH
        if "\n" not in item and "\n" not in last and len(last) + len(item) + 2 <= room:
            lines[-1] = last + ("" if last.endswith("(") else " ") + item + ","
        else:
            lines.append(" " * (indent + 4) + item + ",")
    return "\n".join(lines)[:-1] + ")"


def _differences(a, b, path: tuple, found: dict[tuple, set]) -> None:
    """The keys by which two `to_dict()`s differ, by the path of the sub-config holding them."""
    for key in set(a) | set(b):
        left, right = a.get(key), b.get(key)
        if isinstance(left, dict) and isinstance(right, dict) and "model_type" in left:
            _differences(left, right, path + (key,), found)
        elif left != right:
            found.setdefault(path, set()).add(key)


def _evaluate(source: str, classes: set):
    return eval(source, {cls.__name__: cls for cls in classes})  # noqa: S307 (source this module wrote)


def config_source(config, lead: int = 0) -> tuple[str, set, str]:
    """(source, classes, fallback) (see the module); `lead`: the columns before the expression on its line."""
    forced: dict[tuple, set] = {}
    why = ""
    for _ in range(ROUNDS + 1):
        classes: set = set()
        try:
            source = _call(config, forced, (), classes, 0, lead)
            rebuilt = _evaluate(source, classes)
        except _Differs as exc:
            why = str(exc)
            break
        except Exception as exc:
            why = f"the constructor call raises {type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
            break
        differs: dict[tuple, set] = {}
        _differences(_plain(config), _plain(rebuilt), (), differs)
        if not differs:
            return source, classes, ""
        if all(keys <= forced.get(path, set()) for path, keys in differs.items()):
            why = "the constructor derives " + ", ".join(
                ".".join(path + (key,)) for path, keys in sorted(differs.items()) for key in sorted(keys))
            break
        for path, keys in differs.items():
            forced.setdefault(path, set()).update(keys)
    else:
        why = "the constructor keeps deriving other fields"
    name = type(config).__name__
    return f"{name}.from_dict({literal(_plain(config), 0, 'config')})", {type(config)}, why
