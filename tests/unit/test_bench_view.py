"""The page's pipeline benchmark table: every row with its figures, the ratios with their spread, energy as the
bench said, text escaped; and the progress line with its seconds."""

from __future__ import annotations

from app.ui.bench_view import progress_text, summary_html

SUMMARY = {
    "model": "SmolLM2-135M-Instruct (Q4_1)",
    "threads": 2,
    "max_tokens": 64,
    "load_s": {"one process": 0.6, "split (Hearth)": 1.1},
    "energy": "cannot measure energy here: no readable RAPL counters under /sys/class/powercap",
    "rows": [
        {
            "plan": "one process",
            "users": 1,
            "aggregate_tokens_per_s": 79.3,
            "ms_per_token_p50": 12.3,
            "ms_per_token_p95": 12.7,
            "first_token_ms_p50": 21.2,
            "bytes_per_token": 0,
            "joules_per_token": None,
        },
        {
            "plan": "split (Hearth)",
            "users": 4,
            "aggregate_tokens_per_s": 72.9,
            "ms_per_token_p50": 51.5,
            "ms_per_token_p95": 54.7,
            "first_token_ms_p50": 212.0,
            "bytes_per_token": 223658.0,
            "joules_per_token": 0.25,
        },
    ],
    "split_vs_one_process": {"median": 0.54, "low": 0.49, "high": 0.55, "q1": 0.5, "q3": 0.55, "runs": 3},
    "split_vs_llama_cpp_rpc": None,
}


def test_the_table_has_each_row_the_ratio_with_its_spread_and_what_energy_could_be_measured() -> None:
    page = summary_html(SUMMARY, when="2026-11-26 07:50")
    one, split = page.split("<tbody>")[1].split("</tbody>")[0].split("</tr>")[:2]
    assert "<td>one process</td><td>1</td><td>79.3</td><td>12.3</td><td>12.7</td><td>21</td><td>0</td><td>–</td>" in one
    assert "<td>223,658</td><td>0.250</td>" in split
    assert "split / one process, 1 user: 0.54x (min 0.49, max 0.55, 3 rounds)." in page
    assert "raw RPC" not in page  # not measured in this run
    assert "Energy: cannot measure energy here" in page and "Measured at 2026-11-26 07:50." in page


def test_text_from_the_results_file_is_escaped_and_progress_shows_seconds() -> None:
    page = summary_html({**SUMMARY, "model": "<script>x</script>"})
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert progress_text("bench: round 1 of 1: split (Hearth), 4 at once", 42.4) == (
        "round 1 of 1: split (Hearth), 4 at once… 42 s"
    )
