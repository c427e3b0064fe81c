"""The rule layer: every signal a converted trace holds is a declared rule over the linked events, written once.

A rule (`linked.EventRule`) has a name, what it detects, the signal kinds it gives and `find(linked, findings)`;
`RULES` is the registry (`catalog.RuleSet`: no two of one name) and `apply_rules` runs it over a run's linked events
(`linked.Linked`) into columns (`linked.Findings`). Every reader's events go through the same rules, so a rule fixed
here is fixed for every format. Each rule is declared beside its code; the rules, in the order they run, and where
each lives:

* **transfer** (`rules_transfers`): a copy's direction comes from its runtime call's kind argument when the trace has
  it, else from the copy's label; a runtime copy call that launched no device work the trace shows is a transfer of
  its own (its direction from its kind argument or name, else unknown).
* **sync** (`rules_syncs`) needs device evidence: a runtime call that waits (`SYNC_RUNTIME_CALLS`), a synchronous
  device->host copy call, or a device-side wait event, inside the operator. The outermost operator of a sync kind
  around the evidence (``aten::item`` around ``aten::_local_scalar_dense``; ``aten::index`` around ``aten::nonzero``
  is boolean indexing) gives the reason; an operator's name alone never makes a sync. A wait inside a compiler phase
  (the autotuner's) is the compiler's: part of its compile, not a sync.
* **online compile** (`rules_compile`): a compile call nested in another compile call counts once.
* **ai-cpu** (`rules_fallbacks`): a kernel the device ran on its AI CPU is a device-side fallback, and so is an
  operator a profile's totals place on it (``op_statistic.csv``: a `placement` of unit AI_CPU, counted).
* **inferred fallback** (`rules_fallbacks`, asked for): a leaf operator on a launching thread that launched no device
  work.
* **host bounce** (`rules_fallbacks`): data a backend's dump counts by site as moved through the host
  (``hidden_host_bounce``); the site names the kind (`HOST_BOUNCE_SITES`); its ``*_batch_to_per_entry`` sites are
  bookkeeping, not bounces.
* **logged fallback** (`rules_fallbacks`): an operator a backend's log places on the host; its cause from the words
  the backend logged (a backend's own counts by operator, an explain dump's ``cpu_fallback_by_op``: its reason as it
  names it).
* **counted recompile** (`rules_compile`): operators a backend's dump counts as recompiled (``recompile_by_op``):
  dispatch recompiles.
* **compiled graph**, **compiler phase**, **graph break**, **recompile** (`rules_compile`): a framework's compile log
  records (TORCH_TRACE), by frame of each log file (every rank's log numbers its frames from 0/0); a frame's last
  graph record is its graph (an earlier attempt's was discarded by a restart); a frame whose log holds no graph-break
  or recompile record of its own (older torch) gets them from its compile metrics, a restart Dynamo names only by its
  class being no break. A profiler trace's compiler phase spans (PyTorch's ``(dynamo_timed)`` ranges, which the
  Kineto reader keeps out of the regions): the outermost on its thread is one compiled graph, as long as the span.
  The compiler's time (`rules_compile`: its outermost spans on a thread) is its own: an operator that starts in it
  is the compiler's (`rules_compile.compiler_ops`), and a wait in it is no sync.
* **dataflow** (`rules_schedule`): in a static schedule (events that read and write numbered buffers:
  `Logged.reads`, ``writes``), an instruction depends on the last one that wrote each buffer it reads before it began
  (else the last other one that wrote it), and its engine idled on its latest producer (``transfer`` for a copy
  engine's, else ``dependency``) where that one ended after the engine's previous slice and no later than it began.

The signal a file's own count stands for counts as many (`events` column ``count``); a file's own remedy
(`Logged.fix`) is the signal's note. Not rules, but read from the same linked events for `assemble`: each
region's memory peak (`rules_memory.memory_peaks`) and whether it ran compiled code
(`rules_compile.compiled_regions`).
"""

from __future__ import annotations

from .catalog import RuleSet
from .linked import Columns, EventRule, Findings, Linked
from .rules_compile import (
    COMPILE_NOTE,
    COMPILED_GRAPH_RULE,
    COMPILER_PHASE_RULE,
    COUNTED_RECOMPILE_RECORD,
    COUNTED_RECOMPILE_RULE,
    GRAPH_BREAK_RULE,
    ONLINE_COMPILE_RULE,
    RECOMPILE_RULE,
)
from .rules_fallbacks import (
    AI_CPU_NOTE,
    AI_CPU_RULE,
    BOUNCE_RECORD,
    COUNTED_FALLBACK_RECORD,
    HOST_BOUNCE_RULE,
    INFERRED_FALLBACK_RULE,
    LOGGED_FALLBACK_RULE,
)
from .rules_schedule import DATAFLOW_RULE
from .rules_syncs import SYNC_RULE
from .rules_transfers import TRANSFER_RULE, is_sync_copy_call

# in this order: a run's signals are listed in the order their rules ran
RULES: RuleSet[EventRule] = RuleSet([
    TRANSFER_RULE, SYNC_RULE, ONLINE_COMPILE_RULE, AI_CPU_RULE, INFERRED_FALLBACK_RULE, HOST_BOUNCE_RULE,
    LOGGED_FALLBACK_RULE, COUNTED_RECOMPILE_RULE, COMPILED_GRAPH_RULE, COMPILER_PHASE_RULE, GRAPH_BREAK_RULE,
    RECOMPILE_RULE, DATAFLOW_RULE,
])  # fmt: skip


def apply_rules(linked: Linked) -> Findings:
    """Every rule of `RULES` over the linked events."""
    out = Findings()
    for rule in RULES:
        rule.find(linked, out)
    return out


# `RULES` and `apply_rules`, and names tests and the profiler take from here (defined in the modules above)
__all__ = ["AI_CPU_NOTE", "BOUNCE_RECORD", "COMPILE_NOTE", "COUNTED_FALLBACK_RECORD", "COUNTED_RECOMPILE_RECORD",
           "RULES", "Columns", "apply_rules", "is_sync_copy_call"]
