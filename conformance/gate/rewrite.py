"""Stage 5, gate: one entry of an expectations file rewritten for one run's conditions (`expectations --update`).

Contract of `recorded(file_conditions, entry, run, value, where)`: the
entry (None: the cell is not listed) rewritten so that under `run` it gives
`value` (None: not listed there) and under every other run what it gave
before; None where it is listed nowhere any more. How: the entry is read
as what it gives at each point of the few values its conditions name (one
more value, OTHER, stands for all the others), the run's point is set, and
the points are written back in the grammar of `conformance.gate.expectations`:

* the entry's own fields are those it wrote before where they still hold
  somewhere, else those under the file's conditions, else those of most
  points;
* where it holds becomes as few tables as merging the points key by key
  gives (``{ backend = ["eager", "inductor"] }``, a list where no one table
  says it), each written relative to the file's ``[conditions]``; where
  merging in the keys' order leaves a table the grammar cannot write, the
  fewest tables of another order that it can (a float32 entry with a
  ``torch = "2.14"`` override that a bfloat16 run on 2.13 widens: every
  torch in float32, and bfloat16 on 2.13);
* every other expectation becomes a ``[[cell.when]]`` naming only what
  differs, under the fewest keys that still tell its points apart.

A change that the grammar cannot say raises ExpectationsError (one line,
naming the entry): a key that would hold for every value but some (no
table says "not"), or a fingerprint that a ``[[cell.when]]`` would have to
take away.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from conformance.gate.conditions import matches, values
from conformance.gate.expectations import OVERRIDABLE, Expectation, ExpectationsError, Override

OTHER = "\x00other"  # a value no condition names: stands for every value a key's conditions leave out
PRIORITY = ("backend", "device", "dtype", "torch")  # the key a list of values goes to first: what differs most


def recorded(file_conditions: dict, entry: Expectation | None, run: dict, value: Expectation | None,
             where: str, axes: tuple[str, ...] = ()) -> Expectation | None:
    """`entry` rewritten to give `value` under `run` and what it gave elsewhere (see the module). `axes`: keys on
    which the run stands apart even where no condition names them yet (a torch axis's run: its torch)."""
    tables = [] if entry is None else [{**file_conditions, **t} for t in
                                       (entry.conditions if isinstance(entry.conditions, list) else [entry.conditions])]
    named = [file_conditions, *tables, *(o.conditions for o in (entry.overrides if entry else ()))]
    keys = sorted({key for conditions in named for key in conditions} | set(axes), key=_priority)
    domain = {key: sorted({v for c in named if key in c for v in values(c[key])} | {run[key]}) + [OTHER]
              for key in keys}
    given = {}  # every point of the entry's conditions, over the keys they name -> its expectation there
    for combo in itertools.product(*(domain[key] for key in keys)):
        point = dict(zip(keys, combo))
        if any(matches(table, point) for table in tables):
            given[combo] = entry.resolved(point)
    run_point = tuple(run[key] for key in keys)
    if value is None:
        given.pop(run_point, None)
    else:
        given[run_point] = replace(value, conditions={}, overrides=())
    if not given:
        return None
    base = _base(entry, given, keys, file_conditions)
    overrides = []
    for group in _by_value(given).values():
        if same(group[0][1], base):
            continue
        changes = {name: getattr(group[0][1], name) for name in OVERRIDABLE
                   if getattr(group[0][1], name) != getattr(base, name)}
        if "fingerprint" in changes and changes["fingerprint"] is None:
            raise ExpectationsError(f"{where}: the run recorded no fingerprint, which a [[cell.when]] cannot say; "
                                    "rerun the cell with this suite (it records one)")
        for product in _products([combo for combo, _ in group], keys, domain):
            conditions = _narrowest(_table(product, keys, domain, where), set(given), keys)
            overrides.append(Override(conditions, changes))
    own = [{key: wanted for key, wanted in _table(product, keys, domain, where).items()
            if key not in file_conditions or set(values(file_conditions[key])) != set(values(wanted))}
           for product in _products(list(given), keys, domain)]
    return replace(base, conditions=own[0] if len(own) == 1 else own, overrides=tuple(overrides))


def _priority(key: str) -> tuple:
    return (PRIORITY.index(key) if key in PRIORITY else len(PRIORITY), key)


def same(a: Expectation, b: Expectation) -> bool:
    """Whether two expectations say the same: verdict, reason, link and fingerprint."""
    return all(getattr(a, name) == getattr(b, name) for name in OVERRIDABLE)


def _by_value(given: dict) -> dict:
    """The points of `given` grouped by the expectation they give, in the order of their points."""
    groups: dict = {}
    for combo in sorted(given):
        e = given[combo]
        groups.setdefault((e.verdict, e.reason, e.link, repr(e.fingerprint)), []).append((combo, e))
    return groups


def _base(entry: Expectation | None, given: dict, keys: list, file_conditions: dict) -> Expectation:
    """The expectation an entry writes as its own fields: the one it wrote before where it still holds somewhere,
    else the one of the file's conditions, else the one of most points."""
    if entry is not None:
        before = replace(entry, conditions={}, overrides=())
        if any(same(before, e) for e in given.values()):
            return before
    usual = [e for combo, e in sorted(given.items()) if matches(file_conditions, dict(zip(keys, combo)))]
    if usual:
        return usual[0]
    return max(_by_value(given).values(), key=len)[0][1]


def _products(points: list, keys: list, domain: dict) -> list[list[set]]:
    """`points` (value tuples over `keys`) as few disjoint products as merging them key by key gives, in the
    keys' order; where that order leaves a product the grammar cannot write (some values of a key with OTHER
    among them), the fewest products of another merging order that it can write."""
    first = _merged(points, range(len(keys)))
    if all(_writable(product, keys, domain) for product in first):
        return first
    orders = (_merged(points, order) for order in itertools.permutations(range(len(keys))))
    found = [products for products in orders if all(_writable(product, keys, domain) for product in products)]
    return min(found, key=len) if found else first


def _writable(product: list[set], keys: list, domain: dict) -> bool:
    return all(OTHER not in found or found == set(domain[key]) for key, found in zip(keys, product))


def _merged(points: list, order) -> list[list[set]]:
    """`points` merged key by key, the keys taken in `order` until no two products merge."""
    products = [[{v} for v in combo] for combo in sorted(points)]
    width = len(products[0]) if products else 0
    merged = True
    while merged:
        merged = False
        for i in order:
            groups: dict = {}
            for product in products:
                rest = tuple(tuple(sorted(s)) if j != i else () for j, s in enumerate(product))
                groups.setdefault(rest, []).append(product)
            merged = merged or any(len(members) > 1 for members in groups.values())
            products = [[set().union(*(m[j] for m in members)) if j == i else members[0][j] for j in range(width)]
                        for members in groups.values()]
    return sorted(products, key=lambda product: [sorted(s) for s in product])


def _table(product: list[set], keys: list, domain: dict, where: str) -> dict:
    """A product as a conditions table: a key of every value unnamed; OTHER only so, else not expressible."""
    table = {}
    for key, found in zip(keys, product):
        if found == set(domain[key]):
            continue
        if OTHER in found:
            raise ExpectationsError(f"{where}: cannot write the entry's conditions on {key} as a table (it would hold "
                                    f"for every {key} but {', '.join(sorted(set(domain[key]) - found))}); list the "
                                    f"{key} values it holds for by hand, then update again")
        table[key] = sorted(found)[0] if len(found) == 1 else sorted(found)
    return table


def _narrowest(conditions: dict, region: set, keys: list) -> dict:
    """`conditions` without the keys that tell no point of the entry's `region` apart."""
    def inside(table):
        return {combo for combo in region if matches(table, dict(zip(keys, combo)))}

    wanted = inside(conditions)
    for key in list(conditions):
        fewer = {k: v for k, v in conditions.items() if k != key}
        if fewer and inside(fewer) == wanted:
            conditions = fewer
    return conditions
