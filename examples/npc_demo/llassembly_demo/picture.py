"""A PNG picture of the world with each unit's path in its own colour (no Pillow needed).

:func:`encode_png` is a minimal PNG writer (8-bit RGB, one ``IDAT`` chunk, ``zlib`` and
``struct`` only). :func:`draw_world` paints the map: walls dark, floor light, each unit's path
as a line from its start (hollow square) to where it stands (a disc with its letter), living
enemies red, fallen enemies as dark red crosses, swords on the ground yellow.
"""

from __future__ import annotations

import itertools
import struct
import zlib
from collections.abc import Iterable, Sequence

from .world import World

__all__ = ["CELL", "UNIT_RGB", "Canvas", "draw_world", "encode_png", "png_size"]

CELL = 32  # pixels per map cell
RGB = tuple[int, int, int]
UNIT_RGB: tuple[RGB, ...] = (
    (0, 140, 210),
    (205, 50, 160),
    (30, 160, 60),
    (90, 70, 220),
    (235, 130, 0),
)
_FLOOR, _GRID, _WALL = (238, 234, 224), (222, 216, 204), (54, 56, 66)
_ENEMY, _FALLEN, _SWORD, _HILT = (215, 30, 30), (130, 20, 20), (245, 200, 0), (120, 80, 30)
_WHITE, _OUTLINE = (255, 255, 255), (30, 30, 30)

# 3x5 capitals, rows top to bottom, "1" = ink.
_FONT = dict(
    zip(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        [
            "010101111101101", "110101110101110", "011100100100011", "110101101101110",
            "111100110100111", "111100110100100", "011100101101011", "101101111101101",
            "111010010010111", "001001001101010", "101101110101101", "100100100100111",
            "101111111101101", "110101101101101", "010101101101010", "110101110100100",
            "010101101110011", "110101110101101", "011100010001110", "111010010010010",
            "101101101101111", "101101101101010", "101101111111101", "101101010101101",
            "101101010010010", "111001010100111",
        ],
        strict=True,
    )
)  # fmt: skip


def encode_png(width: int, height: int, rgb: bytes) -> bytes:
    """Encode ``width`` x ``height`` pixels of 8-bit RGB (rows top to bottom) as a PNG file."""
    stride = width * 3
    if len(rgb) != stride * height:
        raise ValueError(f"expected {stride * height} bytes of RGB, got {len(rgb)}")
    raw = b"".join(b"\x00" + rgb[y * stride : (y + 1) * stride] for y in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def png_size(data: bytes) -> tuple[int, int]:
    """``(width, height)`` from a PNG's ``IHDR`` chunk. Raises ``ValueError`` if not a PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG file")
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


class Canvas:
    """An RGB pixel buffer with the few drawing operations the map needs (clipped)."""

    def __init__(self, width: int, height: int, background: RGB) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def dot(self, x: int, y: int, colour: RGB) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i : i + 3] = bytes(colour)

    def rect(self, x0: int, y0: int, x1: int, y1: int, colour: RGB) -> None:
        """Fill the rectangle with corners ``(x0, y0)`` and ``(x1, y1)``, both included."""
        for y in range(max(y0, 0), min(y1, self.height - 1) + 1):
            for x in range(max(x0, 0), min(x1, self.width - 1) + 1):
                self.dot(x, y, colour)

    def disc(self, cx: int, cy: int, r: int, colour: RGB) -> None:
        for y in range(cy - r, cy + r + 1):
            for x in range(cx - r, cx + r + 1):
                if (x - cx) ** 2 + (y - cy) ** 2 <= r * r:
                    self.dot(x, y, colour)

    def line(self, x0: int, y0: int, x1: int, y1: int, colour: RGB, width: int = 3) -> None:
        """A line ``width`` pixels thick (Bresenham, a square brush)."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err, half = dx + dy, width // 2
        while True:
            self.rect(x0 - half, y0 - half, x0 + half, y0 + half, colour)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err, x0 = err + dy, x0 + sx
            if e2 <= dx:
                err, y0 = err + dx, y0 + sy

    def letter(self, ch: str, cx: int, cy: int, colour: RGB, scale: int = 3) -> None:
        """Draw a capital letter centred on ``(cx, cy)``."""
        bits = _FONT.get(ch.upper())
        if bits is None:
            return
        left, top = cx - (3 * scale) // 2, cy - (5 * scale) // 2
        for i, bit in enumerate(bits):
            if bit == "1":
                x, y = left + (i % 3) * scale, top + (i // 3) * scale
                self.rect(x, y, x + scale - 1, y + scale - 1, colour)

    def png(self) -> bytes:
        return encode_png(self.width, self.height, bytes(self.pixels))


def draw_world(
    world: World,
    paths: Sequence[tuple[int, Sequence[tuple[int, int]]]],
    *,
    fallen: Iterable[tuple[int, int]] = (),
    cell: int = CELL,
) -> bytes:
    """A PNG of ``world`` with each ``(unit id, path)`` drawn in the unit's colour.

    Args:
        world: The world as it is now (units, enemies and swords are drawn where they are).
        paths: For each unit, the cells it went through, start first.
        fallen: Where enemies died (drawn as crosses).
        cell: Pixels per cell.
    """
    canvas = Canvas(world.width * cell, world.height * cell, _FLOOR)
    mid = cell // 2
    for y in range(world.height):
        for x in range(world.width):
            left, top = x * cell, y * cell
            if world.is_wall((x, y)):
                canvas.rect(left, top, left + cell - 1, top + cell - 1, _WALL)
            else:
                canvas.rect(left, top, left + cell - 1, top, _GRID)
                canvas.rect(left, top, left, top + cell - 1, _GRID)
    for x, y in fallen:
        cx, cy, r = x * cell + mid, y * cell + mid, cell // 4
        canvas.line(cx - r, cy - r, cx + r, cy + r, _FALLEN)
        canvas.line(cx - r, cy + r, cx + r, cy - r, _FALLEN)
    for x, y in world.swords:
        left, top = x * cell, y * cell
        canvas.line(
            left + cell // 4, top + 3 * cell // 4, left + 3 * cell // 4, top + cell // 4, _SWORD, 4
        )
        canvas.line(
            left + cell // 6, top + cell // 2, left + cell // 2, top + 5 * cell // 6, _HILT, 3
        )
    order = sorted(world.units)
    for unit_id, path in paths:
        colour = UNIT_RGB[order.index(unit_id) % len(UNIT_RGB)]
        shift = (order.index(unit_id) % 3 - 1) * max(cell // 6, 1)  # keep crossing paths apart
        points = [(x * cell + mid + shift, y * cell + mid + shift) for x, y in path]
        for (x0, y0), (x1, y1) in itertools.pairwise(points):
            canvas.line(x0, y0, x1, y1, colour)
        if points:
            sx, sy = points[0]
            r = cell // 4
            canvas.rect(sx - r, sy - r, sx + r, sy + r, colour)
            canvas.rect(sx - r + 2, sy - r + 2, sx + r - 2, sy + r - 2, _FLOOR)
    for enemy in world.enemies.values():
        canvas.disc(enemy.x * cell + mid, enemy.y * cell + mid, cell // 3, _ENEMY)
        canvas.letter("E", enemy.x * cell + mid, enemy.y * cell + mid, _WHITE)
    for unit in world.units.values():
        colour = UNIT_RGB[order.index(unit.id) % len(UNIT_RGB)]
        cx, cy = unit.x * cell + mid, unit.y * cell + mid
        canvas.disc(cx, cy, cell // 2 - 2, _OUTLINE)
        canvas.disc(cx, cy, cell // 2 - 4, colour)
        canvas.letter(unit.letter, cx, cy, _WHITE)
        if unit.sword:
            canvas.line(
                cx + cell // 4, cy - cell // 4, cx + cell // 2 - 2, cy - cell // 2 + 2, _SWORD, 3
            )
    return canvas.png()
