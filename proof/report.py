"""The report: what the notebooks display, and the HTML that nbconvert renders from 03.

Every table and figure is built from the output folder alone (predictions.json and the family
results), so the report can be rebuilt, or re-scored, without a model or a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator
import pandas as pd

from proof import analysis, commit, files
from shortlist import families as families_

TEMPLATE = Path(__file__).resolve().parent / "templates"
COLORS = {"improves": "#1b7837", "no change": "#762a83"}


@dataclass
class Report:
    out: Path
    body: dict  # predictions.json
    sha: str
    results: dict  # family key -> its result file (done or failed); families not run are absent
    across: dict  # analysis.across() of the finished families

    def prediction(self, key: str) -> dict:
        return commit.prediction_for(self.body, key)

    def done(self) -> list[dict]:
        return [self.results[k] for k in self.body["families"] if self.results.get(k, {}).get("status") == "done"]


def load(out) -> Report:
    """Predictions (hash checked) and every result that was made against them."""
    body, sha = commit.committed(out)
    results = {}
    for key in body["families"]:
        result = files.made_against(files.result(out, families_.parse(key).slug), sha)
        if result:
            if result["status"] == "done":
                result["analysis"] = analysis.family(result, body["settings"])
            results[key] = result
    done = [results[k] for k in body["families"] if results.get(k, {}).get("status") == "done"]
    return Report(Path(out), body, sha, results, analysis.across(body["predictions"], done, body["trainee"]))


def status(report: Report, key: str) -> str:
    result = report.results.get(key)
    return "not run" if result is None else "done" if result["status"] == "done" else f"failed: {result['reason']}"


# --- text ---------------------------------------------------------------------------------------
def headline(report: Report) -> str:
    """How many predictions held, and how many of the gains were real learning, in plain words."""
    done = report.done()
    held = sum(r["held"] for r in done)
    raised = [r for r in done if r["improved"]]
    real = sum(r["analysis"]["learning"] == "accuracy" for r in raised)
    if raised:
        gains = (f"and of the {len(raised)} significant gains GRPO made, {real} were real learning (more correct "
                 f"answers) and {len(raised) - real} were partial credit only")
    else:
        gains = "and GRPO made no significant gain on any of them"
    text = f"**The rule held on {held} of {len(done)} families**, {gains}."
    kept = [r["analysis"]["judgement"] for r in done if r["prediction"]["prediction"] == "no change" and r["held"]]
    if kept:
        text += (f" Among the \"no change\" predictions that held: {sum('equivalent' in j for j in kept)} shown to be "
                 f"no change within ±{report.body['settings']['equivalence_margin']}, "
                 f"{sum('inconclusive' in j for j in kept)} inconclusive.")
    failed = sum(1 for k in report.body["families"] if status(report, k).startswith("failed"))
    missing = len(report.body["families"]) - len(done) - failed
    extra = ", ".join(part for part, count in ((f"{failed} failed", failed), (f"{missing} not run", missing)) if count)
    return text + (f" ({extra}.)" if extra else "")


# --- tables -------------------------------------------------------------------------------------
def _table(rows: list[dict], formats: dict):
    frame = pd.DataFrame(rows)
    return frame.style.format({k: v for k, v in formats.items() if k in frame}, na_rep="–").hide(axis="index")


def predictions_table(body: dict):
    k = body["settings"]["group"]
    rows = [{"family": p["family"], "pass@1": p["pass1"], f"pass@{k}": p["passk"], "mean score": p["mean"],
             "signal (raw)": p["signal_raw"], "signal (correct)": p["signal_correct"], "mean p(1−p)": p["learnability"],
             "extracted": p["extracted"], "verdict": p["verdict"], "prediction": p["prediction"]}
            for p in body["predictions"]]
    return _table(rows, {c: "{:.2f}" for c in ("pass@1", f"pass@{k}", "signal (raw)", "signal (correct)", "extracted")}
                  | {"mean score": "{:.3f}", "mean p(1−p)": "{:.3f}"})


def _arrow(before, after, fmt="{:.3f}") -> str:
    return f"{fmt.format(before)} → {fmt.format(after)}"


def _ci(g: dict) -> str:
    return f"{g['gain']:+.3f} [{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}]"


def outcome_row(report: Report, key: str) -> dict:
    """The seed's analysis of one family, unchanged, with Holm's adjustment beside its p."""
    row = {"family": key, "prediction": report.prediction(key)["prediction"]}
    result = report.results.get(key)
    if result is None or result["status"] != "done":
        return row | {"status": status(report, key)}
    b, a = result["before"], result["after"]
    return row | {"accuracy": _arrow(b["accuracy"], a["accuracy"]), "mean score": _arrow(b["mean_score"], a["mean_score"]),
                  "gain [95% CI]": _ci(result["gain"]), "p": result["gain"]["p"],
                  "p (Holm)": report.across["holm"]["score"][report.done().index(result)],
                  "improved": "yes" if result["improved"] else "no", "held": "yes" if result["held"] else "no",
                  "status": "done"}


def outcomes_table(report: Report):
    return _table([outcome_row(report, k) for k in report.body["families"]], {"p": "{:.4f}", "p (Holm)": "{:.4f}"})


def learning_row(report: Report, result: dict) -> dict:
    """Was a gain real learning? The same bootstrap on accuracy, and the judgement that follows."""
    a = result["analysis"]
    return {"family": result["family"], "prediction": result["prediction"]["prediction"],
            "gain in score": _ci(result["gain"]), "gain in accuracy [95% CI]": _ci(a["accuracy_gain"]),
            "p": a["accuracy_gain"]["p"], "p (Holm)": report.across["holm"]["accuracy"][report.done().index(result)],
            "learning": a["learning"], "judged": a["judgement"]}


def learning_table(report: Report):
    return _table([learning_row(report, r) for r in report.done()], {"p": "{:.4f}", "p (Holm)": "{:.4f}"})


def format_table(report: Report):
    """What the answers looked like before and after: extractable, and how long."""
    rows = [{"family": r["family"], "extracted": _arrow(r["before"]["extracted"], r["after"]["extracted"], "{:.2f}"),
             "answer length (chars)": _arrow(r["before"]["answer_chars"] or 0, r["after"]["answer_chars"] or 0, "{:.1f}"),
             "completion length (chars)": _arrow(r["before"]["completion_chars"], r["after"]["completion_chars"], "{:.1f}")}
            for r in report.done()]
    return _table(rows, {})


def equivalence_table(report: Report):
    """"No change" judged by an equivalence test, and what eval_n could have detected."""
    margin = report.body["settings"]["equivalence_margin"]
    rows = [{"family": r["family"], "prediction": r["prediction"]["prediction"],
             "gain [95% CI]": _ci(r["gain"]), f"TOST p (±{margin})": r["analysis"]["equivalence"]["p"],
             "equivalent": "yes" if r["analysis"]["equivalence"]["equivalent"] else "no",
             "SD of differences": r["analysis"]["difference_sd"], "detectable gain (80% power)": r["analysis"]["mde"],
             "judged": r["analysis"]["judgement"]} for r in report.done()]
    return _table(rows, {f"TOST p (±{margin})": "{:.4f}", "SD of differences": "{:.3f}",
                         "detectable gain (80% power)": "{:.3f}"})


def rules_table(report: Report):
    """Shortlist's rule against simpler ones, on the same families."""
    rows = [{"rule": r["rule"], "predicted improves": r["predicted improves"], "hits": f"{r['hits']} of {r['of']}",
             "hit rate [95% CI]": f"{r['hit rate']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]"
             if r["hit rate"] is not None else None, "hits on accuracy": f"{r['hits on accuracy']} of {r['of']}"}
            for r in report.across["rules"]]
    return _table(rows, {})


def confusion_table(report: Report):
    c = report.across["confusion"]
    rows = [{"predicted": "improves", "improved": c["improves, improved"], "not improved": c["improves, not improved"]},
            {"predicted": "no change", "improved": c["no change, improved"],
             "not improved": c["no change, not improved"]}]
    return _table(rows, {})


def confusion_text(report: Report) -> str:
    c = report.across["confusion"]
    if c["accuracy"] is None:
        return "No family finished, so the rule has no accuracy yet."
    return (f"The rule's accuracy: {c['accuracy']:.2f} (Wilson 95% CI {c['ci95'][0]:.2f}–{c['ci95'][1]:.2f}) "
            f"over {sum(v for k, v in c.items() if ',' in k)} families.")


def correlations_table(report: Report):
    def cell(s):
        return f"{s['rho']:+.2f} (p {s['p']:.3f})" if s["rho"] is not None else f"– (n = {s['n']})"
    rows = [{"screening signal": c["signal"], "ρ with score gain": cell(c["score gain"]),
             "ρ with accuracy gain": cell(c["accuracy gain"])} for c in report.across["correlations"]]
    return _table(rows, {})


def scoring_table(report: Report):
    """How the reward itself behaved: the scorer's oddities per family, screening and training together."""
    columns = ("answers", "unextracted", "timeouts", "crashes", "exceptions", "non_finite", "clamped", "refused")
    rows = []
    for key in report.body["families"]:
        counts = dict.fromkeys(columns, 0)
        for part in (report.prediction(key).get("scoring", {}), report.results.get(key, {}).get("scoring", {})):
            for c in columns:
                counts[c] += part.get(c, 0)
        rows.append({"family": key, **{c.replace("_", "-"): counts[c] for c in columns}})
    return _table(rows, {})


def plan_table(report: Report):
    """The analysis as declared in predictions.json before training."""
    return pd.DataFrame(list(report.body["analysis"].items()), columns=["", "declared"]).style.hide(axis="index")


def family_summary(result: dict):
    """The one-family table 02_train_family shows."""
    return _table([{"family": result["family"], "prediction": result["prediction"]["prediction"],
                    "accuracy": _arrow(result["before"]["accuracy"], result["after"]["accuracy"]),
                    "mean score": _arrow(result["before"]["mean_score"], result["after"]["mean_score"]),
                    "gain": result["gain"]["gain"], "p": result["gain"]["p"], "improved": result["improved"],
                    "held": result["held"], "minutes training": result["timings"]["train_s"] / 60}],
                  {"gain": "{:+.3f}", "p": "{:.4f}", "minutes training": "{:.1f}"})


def provenance_table(report: Report):
    b = report.body
    starts = sorted(r["started_at"] for r in report.done() if "started_at" in r)
    gpus = sorted({g for rec in [b, *report.results.values()] for g in rec.get("device", {}).get("gpus", [])})
    rows = [("model", b["model"]["name"]), ("model path", b["model"]["path"]),
            ("model revision", b["model"]["revision"] or "–"), ("predictions SHA-256", report.sha),
            ("predictions written", b["written_at"]), ("training first started", starts[0] if starts else "–"),
            ("rule", b["trainee"]["rule"]),
            ("thresholds", ", ".join(f"{k} = {b['trainee'][k]}" for k in ("pass_min", "pass_max", "grpo_signal_min"))),
            ("sampling", ", ".join(f"{k} = {b['trainee'][k]}" for k in
                                   ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "enable_thinking"))
             + f", max_new_tokens = {b['settings']['max_new_tokens']}"),
            ("settings", ", ".join(f"{k} = {v}" for k, v in b["settings"].items())),
            ("seed ranges", ", ".join(f"{k} {a}..{z - 1}" for k, (a, z) in b["seed_ranges"].items())),
            ("GPU", ", ".join(gpus) or "none (CPU)"),
            ("versions", ", ".join(f"{k} {v}" for k, v in b["versions"].items() if v)),
            ("scorer sandbox", ", ".join(f"{k}: {v}" for k, v in b["scoring"].get("confinement", {}).items()))]
    return pd.DataFrame(rows, columns=["", "value"]).style.hide(axis="index")


def notebook_links(report: Report) -> str:
    """HTML links, relative to report.html, to each executed notebook."""
    items = [("01_predict", "notebooks/01_predict.ipynb", "predictions")]
    for key in report.body["families"]:
        items.append((key, f"notebooks/02_train_family.{families_.parse(key).slug}.ipynb", status(report, key)))
    items.append(("03_report", "notebooks/03_report.ipynb", "this report"))
    return "<ul>" + "".join(f'<li><a href="{href}">{name}</a> — {what}</li>' for name, href, what in items) + "</ul>"


# --- figures ------------------------------------------------------------------------------------
def _marks(prediction: str) -> dict:
    """Filled circles for "improves", hollow squares for "no change", in every figure."""
    color = COLORS[prediction]
    return {"marker": "o" if prediction == "improves" else "s", "color": color, "linestyle": "none",
            "markerfacecolor": color if prediction == "improves" else "white"}


def _plot_curve(ax, result: dict, title: str) -> None:
    steps = [row["step"] for row in result["reward_curve"]]
    ax.plot(steps, [row["reward"] for row in result["reward_curve"]], marker=".", label="mean reward")
    ax.plot(steps, [row["frac_reward_zero_std"] for row in result["reward_curve"]], marker=".", linestyle="--",
            label="share of zero-variance groups")
    ax.set_ylim(-0.02, 1.02)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("GRPO step")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)


def curve_figure(result: dict):
    fig, ax = plt.subplots(figsize=(6, 3.2))
    _plot_curve(ax, result, result["family"])
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def curves_figure(report: Report):
    done = report.done()
    if not done:
        return None
    cols = min(3, len(done))
    rows = -(-len(done) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.2 * rows), squeeze=False)
    for ax, result in zip(axes.flat, done):
        _plot_curve(ax, result, f"{result['family']}\npredicted: {result['prediction']['prediction']}")
    for ax in list(axes.flat)[len(done):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def forest_figure(report: Report):
    """Each family's gain in mean score with its 95% CI, marked by what was predicted."""
    done = report.done()
    if not done:
        return None
    fig, ax = plt.subplots(figsize=(7, 0.55 * len(done) + 1.2))
    for y, result in enumerate(reversed(done)):
        g, pred = result["gain"], result["prediction"]["prediction"]
        ax.errorbar(g["gain"], y, xerr=[[g["gain"] - g["ci95"][0]], [g["ci95"][1] - g["gain"]]], capsize=3,
                    **_marks(pred))
    ax.axvline(0, color="grey", linewidth=1)
    ax.set_yticks(range(len(done)), [r["family"] for r in reversed(done)], fontsize=8)
    ax.set_xlabel("gain in mean score after GRPO (95% bootstrap CI)")
    for pred in COLORS:
        ax.plot([], [], label=f"predicted: {pred}", **_marks(pred))
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def scatter_figure(report: Report):
    """Each screening signal against the measured gain in mean score, one panel per signal."""
    done = report.done()
    if not done:
        return None
    by_family = {p["family"]: p for p in report.body["predictions"]}
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.4), sharey=True)
    for ax, (key, label) in zip(axes.flat, analysis.SIGNALS.items()):
        for r in done:
            ax.plot(by_family[r["family"]][key], r["gain"]["gain"], **_marks(r["prediction"]["prediction"]))
        rho = next(c for c in report.across["correlations"] if c["key"] == key)["score gain"]["rho"]
        ax.set_title(f"{label}: ρ = {rho:+.2f}" if rho is not None else label, fontsize=9)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.grid(alpha=0.3)
    low, high = axes[0, 0].get_ylim()
    if high - low < 0.02:  # every gain (near) zero: show a readable scale, not 1e-17
        axes[0, 0].set_ylim(low - 0.05, high + 0.05)
    for ax in axes[:, 0]:
        ax.set_ylabel("gain in mean score")
    fig.tight_layout()
    return fig


# --- HTML ---------------------------------------------------------------------------------------
def nbconvert_templates() -> str:
    """The folder holding nbconvert's own templates ("lab", "base"), looked up from where nbconvert is installed.

    nbconvert searches only jupyter_path(), which names sys.prefix: in a venv made with
    --system-site-packages (the Makefile's default) an nbconvert installed in the base Python is
    imported, but its templates under the base prefix are never found. CI failed on exactly that.
    """
    import nbconvert
    from jupyter_core.paths import jupyter_path
    installed = [parent / "share" / "jupyter" for parent in Path(nbconvert.__file__).parents]
    for root in installed + [Path(p) for p in jupyter_path()]:
        if (root / "nbconvert" / "templates" / "lab" / "conf.json").is_file():
            return str(root / "nbconvert" / "templates")
    raise FileNotFoundError(f"nbconvert's 'lab' template is in none of {[str(r) for r in installed]}: reinstall nbconvert")


def render(executed: Path, dest: Path) -> Path:
    """report.html from the executed 03 notebook: no code, no stderr, nothing fetched from the network."""
    import nbformat
    from nbconvert import HTMLExporter
    nb = nbformat.read(executed, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
    nb.metadata["title"] = "Shortlist: the proof"
    # "lab" is looked up under the base dirs; templates' own {% extends 'base/...' %} under the paths
    templates = nbconvert_templates()
    exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True, extra_template_paths=[str(TEMPLATE), templates],
                            extra_template_basedirs=[templates])
    exporter.template_file = "report.html.j2"
    html, _ = exporter.from_notebook_node(nb)
    files.write_text(dest, html)
    return dest
