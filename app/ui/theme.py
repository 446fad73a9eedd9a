"""The page's look: a Gradio theme and a little CSS, so Hearth reads as a product rather than a demo.

Taken from Jan's published screenshots (its docs' chat, thread list and model list, read from its public docs
repository): a quiet light canvas with white panels and thin borders instead of shadows; the selected
conversation as a soft rounded row; a greeting centred in an empty chat; tables as plain rows with thin dividers;
one accent colour, kept for the action that matters (Send, Install, Start training). Hearth's own: a warm ember
accent (a hearth, not a brand blue), and "stop" buttons drawn in outline, so Stop and Cancel do not shout while
they wait. Fonts are Gradio's bundled ones, served by Hearth itself: nothing is fetched from the internet.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

# A warm ember scale (50 … 950), the accent of primary buttons, the chosen tab and links.
EMBER = gr.themes.Color(
    c50="#fdf6f0",
    c100="#fbe9da",
    c200="#f5cfb0",
    c300="#eeae7f",
    c400="#e4844a",
    c500="#d9662a",
    c600="#c2521d",
    c700="#a1401a",
    c800="#81351c",
    c900="#692e1a",
    c950="#38150b",
    name="ember",
)


def hearth_theme() -> Any:
    """Gradio's base theme with Hearth's colours, spacing and borders."""
    theme = gr.themes.Base(
        primary_hue=EMBER,
        secondary_hue=gr.themes.colors.stone,
        neutral_hue=gr.themes.colors.stone,
        radius_size=gr.themes.sizes.radius_md,
        spacing_size=gr.themes.sizes.spacing_md,
        text_size=gr.themes.sizes.text_md,
    )
    return theme.set(
        body_background_fill="*neutral_50",
        block_background_fill="white",
        block_border_width="1px",
        block_border_color="*neutral_200",
        block_shadow="none",
        block_label_text_color="*neutral_500",
        block_title_text_color="*neutral_600",
        input_background_fill="white",
        input_border_color="*neutral_200",
        input_border_color_focus="*primary_300",
        button_primary_background_fill="*primary_600",
        button_primary_background_fill_hover="*primary_700",
        button_primary_border_color="*primary_600",
        button_primary_text_color="white",
        button_border_width="1px",
        button_secondary_background_fill="white",
        button_secondary_background_fill_hover="*neutral_100",
        button_secondary_border_color="*neutral_300",
        button_cancel_background_fill="white",
        button_cancel_background_fill_hover="#fef2f2",
        button_cancel_border_color="#fca5a5",
        button_cancel_text_color="#b91c1c",
        button_cancel_text_color_hover="#991b1b",
        table_border_color="*neutral_200",
        table_even_background_fill="white",
        table_odd_background_fill="*neutral_50",
        link_text_color="*primary_700",
        link_text_color_visited="*primary_800",
    )


THEME_CSS = """
/* The tabs: the chosen one in the accent, all of them a little heavier than body text. */
.tab-wrapper button[role='tab'] { font-weight: 500; }
/* The conversation list: plain rows, the open one a soft rounded band (as Jan's thread list). */
.form:has(> #conversation-list) { background: transparent; border: none; }
#conversation-list { background: transparent; }
#conversation-list label { border: none !important; background: transparent !important; border-radius: 8px;
  padding: 6px 10px; box-shadow: none !important; }
#conversation-list label:hover { background: var(--neutral-100) !important; }
#conversation-list label.selected { background: var(--neutral-200) !important; font-weight: 500; }
#conversation-list input[type='radio'] { display: none; }
/* Tables (files, models, adapters) in the page's own type, not a typewriter's. */
.table-wrap table, .table-wrap .cell-wrap { font-family: var(--font); }
/* The chat: an empty one greets; an answer's sources and tool calls read as quiet notes under it. */
#chat .placeholder { font-size: 1.1em; color: var(--neutral-500); }
#chat details { border-top: 1px solid var(--neutral-200); padding: 4px 0; font-size: 0.92em; }
#chat details summary { cursor: pointer; color: var(--neutral-600); }
#chat details[open] summary { color: var(--neutral-800); }
/* The header's line: the model's name first, the rest of the line muted. */
#status-line { color: var(--neutral-600); }
#status-line strong { color: var(--neutral-900); }
"""
