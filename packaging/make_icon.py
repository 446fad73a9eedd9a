"""Draw Hearth's icon (a flame over a hearth stone on a warm tile) at 512 px; saved as app/desktop/hearth.png.

Run once when the icon changes: `.venv/bin/python packaging/make_icon.py`. The PNG is committed.
"""

from __future__ import annotations

import math
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter

SIZE = 512
OUT = Path(__file__).resolve().parent.parent / "app" / "desktop" / "hearth.png"


def flame(cx: float, base: float, height: float, width: float, steps: int = 120) -> list[tuple[float, float]]:
    """A teardrop: round at the bottom, drawn to a point at the top, the tip leaning a little."""
    points = []
    for i in range(steps):
        t = 2 * math.pi * i / steps
        x = math.sin(t)
        y = -math.cos(t)  # -1 at the top, 1 at the bottom
        squeeze = (1 + y) / 2  # 0 at the tip, 1 at the bottom
        px = cx + x * width / 2 * (squeeze**0.7) + (1 - squeeze) ** 2 * width * 0.12
        py = base - height * (1 - y) / 2
        points.append((px, py))
    return points


def main() -> None:
    scale = 4  # drawn large, then shrunk: smooth edges
    big = SIZE * scale
    image = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((0, 0, big - 1, big - 1), radius=big * 0.22, fill=(43, 33, 24, 255))
    glow = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    ImageDraw.Draw(glow).ellipse((big * 0.18, big * 0.2, big * 0.82, big * 0.84), fill=(194, 84, 27, 120))
    image.alpha_composite(glow.filter(ImageFilter.GaussianBlur(big * 0.08)))
    draw = ImageDraw.Draw(image)
    draw.polygon(flame(big * 0.5, big * 0.74, big * 0.56, big * 0.42), fill=(232, 110, 38, 255))
    draw.polygon(flame(big * 0.5, big * 0.74, big * 0.38, big * 0.26), fill=(249, 176, 62, 255))
    draw.polygon(flame(big * 0.5, big * 0.74, big * 0.2, big * 0.12), fill=(255, 236, 170, 255))
    draw.rounded_rectangle((big * 0.2, big * 0.74, big * 0.8, big * 0.82), radius=big * 0.03, fill=(120, 92, 70, 255))
    image.resize((SIZE, SIZE), Image.Resampling.LANCZOS).save(OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
