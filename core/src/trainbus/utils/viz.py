"""Visualizing images with NumPy and Pillow: grids of patches, boxes, masks, text, heat maps, and a window.

Images are ``uint8``-range arrays, HW (gray) or HWC with 3 channels in the caller's channel order (tensorpack's
examples use BGR; colours given here are in the same order as the image). Only :func:`interactive_imshow`
needs a display (and an OpenCV build with GUI support); without one it raises ``RuntimeError`` at once.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from trainbus.utils.argtools import shape2d

__all__ = ["interactive_imshow", "stack_patches", "gen_stack_patches", "dump_dataflow_images", "intensity_to_rgb",
           "draw_text", "draw_boxes", "draw_mask"]


def _gui_cv2() -> Any:
    """cv2 if a window can be opened here; otherwise a RuntimeError saying why."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise RuntimeError("interactive_imshow needs a display, but neither DISPLAY nor WAYLAND_DISPLAY is set; "
                           "save the image instead (e.g. PIL.Image.fromarray(img).save('out.png'))")
    try:
        import cv2
    except ImportError:
        raise RuntimeError("interactive_imshow needs OpenCV with GUI support (pip install opencv-python)") from None
    info = cv2.getBuildInformation()
    gui = [ln for ln in info.splitlines() if ln.strip().startswith("GUI:")]
    if gui and gui[0].split(":", 1)[1].strip().upper() in ("NONE", "NO", ""):
        raise RuntimeError("interactive_imshow: this OpenCV build has no GUI support (opencv-python-headless?); "
                           "install opencv-python, or save the image instead")
    return cv2


def interactive_imshow(img: np.ndarray, lclick_cb: Callable | None = None, rclick_cb: Callable | None = None,
                       **kwargs: Callable) -> None:
    """Show ``img`` (BGR) in a window and wait for a key.

    :param lclick_cb, rclick_cb: ``func(img, x, y)`` called on a left / right click.
    :param kwargs: ``key_cb_<c>=func(img)`` called when key ``c`` is pressed.

    Keys: ``q`` closes the window, ``x`` exits the program, ``s`` saves ``out.png``, ``+``/``=`` and ``-``
    zoom in and out. Raises ``RuntimeError`` without a display or without a GUI-enabled OpenCV.
    """
    cv2 = _gui_cv2()
    name = "trainbus_viz_window"
    cv2.imshow(name, img)

    def on_mouse(event: int, x: int, y: int, *args: Any) -> None:
        if event == cv2.EVENT_LBUTTONUP and lclick_cb is not None:
            lclick_cb(img, x, y)
        elif event == cv2.EVENT_RBUTTONUP and rclick_cb is not None:
            rclick_cb(img, x, y)

    cv2.setMouseCallback(name, on_mouse)
    key = cv2.waitKey(-1)
    while key >= 128:
        key = cv2.waitKey(-1)
    ch = chr(key & 0xFF)
    if f"key_cb_{ch}" in kwargs:
        kwargs[f"key_cb_{ch}"](img)
    elif ch == "q":
        cv2.destroyWindow(name)
    elif ch == "x":
        sys.exit()
    elif ch == "s":
        cv2.imwrite("out.png", img)
    elif ch in "+=-":
        f = 1.3 if ch in "+=" else 0.7
        interactive_imshow(cv2.resize(img, None, fx=f, fy=f, interpolation=cv2.INTER_CUBIC), lclick_cb, rclick_cb,
                           **kwargs)


def _as_patch_array(plist: Any) -> np.ndarray:
    try:
        arr = np.asarray(plist)
    except ValueError:  # NumPy refuses ragged lists
        arr = np.empty(0, dtype=object)
    if arr.dtype == object:
        raise ValueError("stack_patches: the patches have different shapes; pass pad=True to pad them to one size")
    if arr.ndim == 3:
        arr = arr[:, :, :, np.newaxis]
    if arr.ndim != 4 or arr.shape[3] not in (1, 3):
        raise ValueError(f"stack_patches: expected NHW or NHWC patches with 1 or 3 channels, got shape {arr.shape}")
    return arr


def _pad_patches(plist: Sequence[np.ndarray], bgcolor: int | Sequence[int]) -> np.ndarray:
    """Center every patch on a canvas of the largest height and width, 3 channels, filled with ``bgcolor``."""
    pats = []
    for p in plist:
        p = np.asarray(p)
        if p.ndim == 2:
            p = p[:, :, np.newaxis]
        if p.shape[2] == 1:
            p = np.repeat(p, 3, axis=2)
        pats.append(p)
    ph = max(p.shape[0] for p in pats)
    pw = max(p.shape[1] for p in pats)
    out = np.empty((len(pats), ph, pw, 3), dtype=pats[0].dtype)
    out[...] = bgcolor
    for i, p in enumerate(pats):
        top, left = (ph - p.shape[0]) // 2, (pw - p.shape[1]) // 2
        out[i, top:top + p.shape[0], left:left + p.shape[1]] = p
    return out


class _Canvas:
    """A grid of ``nr_row x nr_col`` cells of ``ph x pw`` pixels separated by ``border`` pixels."""

    def __init__(self, ph: int, pw: int, nr_row: int, nr_col: int, channel: int, border: int | None,
                 bgcolor: int | Sequence[int]) -> None:
        self.ph, self.pw, self.nr_row, self.nr_col = ph, pw, nr_row, nr_col
        self.border = int(0.05 * min(ph, pw)) if border is None else border
        self.bgcolor = bgcolor
        self.channel = max(channel, 1 if isinstance(bgcolor, (int, np.integer)) else 3)
        self.canvas = np.zeros((nr_row * (ph + self.border) - self.border,
                                nr_col * (pw + self.border) - self.border, self.channel), dtype=np.uint8)

    def draw_patches(self, plist: np.ndarray) -> None:
        if len(plist) > self.nr_row * self.nr_col:
            raise ValueError(f"stack_patches: {len(plist)} patches do not fit in {self.nr_row} rows x "
                             f"{self.nr_col} columns")
        if self.channel == 3 and plist.shape[3] == 1:
            plist = np.repeat(plist, 3, axis=3)
        self.canvas[...] = self.bgcolor
        for i, patch in enumerate(plist):
            r, c = divmod(i, self.nr_col)
            y0, x0 = r * (self.ph + self.border), c * (self.pw + self.border)
            self.canvas[y0:y0 + self.ph, x0:x0 + self.pw] = patch

    def patch_index(self, x: int, y: int) -> int:
        """The index of the cell under canvas pixel ``(x, y)``."""
        return (y // (self.ph + self.border)) * self.nr_col + x // (self.pw + self.border)


def stack_patches(patch_list: Any, nr_row: int, nr_col: int, border: int | None = None, pad: bool = False,
                  bgcolor: int | Sequence[int] = 255, viz: bool = False,
                  lclick_cb: Callable[[np.ndarray, int], Any] | None = None) -> np.ndarray:
    """Lay patches out in a grid, row by row, and return the ``uint8`` grid image.

    :param patch_list: NHW or NHWC (1 or 3 channels) images in [0, 255], as an array or a list.
    :param nr_row, nr_col: the grid; ``nr_row * nr_col >= len(patch_list)``.
    :param border: pixels between patches (default ``int(0.05 * min(patch height, patch width))``), filled with
        ``bgcolor``.
    :param pad: pad patches of different sizes to the largest one (centered on ``bgcolor``).
    :param bgcolor: background, an int or a 3-tuple (then the result has 3 channels).
    :param viz: also show the result with :func:`interactive_imshow`.
    :param lclick_cb: ``f(patch, index)`` called when a patch is clicked in the window (implies ``viz``).

    The result has shape ``(nr_row * (h + border) - border, nr_col * (w + border) - border, channels)``.
    """
    if pad:
        patch_list = _pad_patches(patch_list, bgcolor)
    patches = _as_patch_array(patch_list)
    viz = viz or lclick_cb is not None
    ph, pw = patches.shape[1:3]
    canvas = _Canvas(ph, pw, nr_row, nr_col, patches.shape[-1], border, bgcolor)
    canvas.draw_patches(patches)
    if viz:
        cb = None
        if lclick_cb is not None:
            def cb(img: np.ndarray, x: int, y: int) -> None:
                idx = canvas.patch_index(x, y)
                if idx < len(patches):
                    lclick_cb(patches[idx], idx)
        interactive_imshow(canvas.canvas, lclick_cb=cb)
    return canvas.canvas


def gen_stack_patches(patch_list: Any, nr_row: int | None = None, nr_col: int | None = None,
                      border: int | None = None, max_width: int = 1000, max_height: int = 1000,
                      bgcolor: int | Sequence[int] = 255, viz: bool = False,
                      lclick_cb: Callable[[np.ndarray, int], Any] | None = None) -> Iterator[np.ndarray]:
    """Like :func:`stack_patches` for a long list: yields one grid per ``nr_row * nr_col`` patches.

    ``nr_row`` / ``nr_col`` default to as many as fit in ``max_height`` / ``max_width`` pixels. The same array
    is reused for every grid: copy a yielded grid to keep it.
    """
    patches = _as_patch_array(patch_list)
    viz = viz or lclick_cb is not None
    ph, pw = patches.shape[1:3]
    if border is None:
        border = int(0.05 * min(ph, pw))
    nr_row = int(max_height / (ph + border)) if nr_row is None else nr_row
    nr_col = int(max_width / (pw + border)) if nr_col is None else nr_col
    if nr_row < 1 or nr_col < 1:
        raise ValueError(f"gen_stack_patches: patches of {ph}x{pw} do not fit in max_height={max_height}, "
                         f"max_width={max_width}")
    canvas = _Canvas(ph, pw, nr_row, nr_col, patches.shape[-1], border, bgcolor)
    per = nr_row * nr_col
    for start in range(0, len(patches), per):
        chunk = patches[start:start + per]
        canvas.draw_patches(chunk)
        if viz:
            cb = None
            if lclick_cb is not None:
                def cb(img: np.ndarray, x: int, y: int, _start: int = start, _n: int = len(chunk)) -> None:
                    idx = canvas.patch_index(x, y)
                    if idx < _n:
                        lclick_cb(patches[_start + idx], _start + idx)
            interactive_imshow(canvas.canvas, lclick_cb=cb)
        yield canvas.canvas


def _resize(img: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    from PIL import Image

    h, w = hw
    arr = np.clip(img, 0, 255).astype(np.uint8)
    squeeze = arr.ndim == 3 and arr.shape[2] == 1
    pil = Image.fromarray(arr[:, :, 0] if squeeze else arr)
    out = np.asarray(pil.resize((w, h), Image.BILINEAR))
    return out[:, :, np.newaxis] if squeeze else out


def dump_dataflow_images(df: Any, index: int = 0, batched: bool = True, number: int = 1000,
                         output_dir: str | None = None, scale: float = 1, resize: Any = None,
                         viz: Any = None, flipRGB: bool = False) -> None:
    """Save (and/or show in grids) the images of one component of a DataFlow's datapoints.

    :param df: the DataFlow (``reset_state()`` is called, then it is iterated, repeatedly if needed).
    :param index: which component of each datapoint holds the image(s).
    :param batched: whether that component is a batch (NHW/NHWC) or one image (HW/HWC).
    :param number: stop after this many images.
    :param output_dir: save ``001.jpg``, ``002.jpg``, ... there (created if needed).
    :param scale: multiply pixel values by this (e.g. 255 for images in [0, 1]).
    :param resize: ``(h, w)`` (or an int) to resize every image to.
    :param viz: ``(rows, cols)``: show grids of that size with :func:`stack_patches`.
    :param flipRGB: reverse the channel order (RGB <-> BGR).
    """
    from PIL import Image

    if output_dir:
        os.makedirs(output_dir, exist_ok=True)
    vizshape = shape2d(viz) if viz is not None else None
    size = tuple(shape2d(resize)) if resize is not None else None
    pending: list[np.ndarray] = []
    df.reset_state()
    cnt = 0
    while True:
        got_any = False
        for dp in df:
            got_any = True
            for img in (dp[index] if batched else [dp[index]]):
                cnt += 1
                img = np.asarray(img)
                if scale != 1:
                    img = img * scale
                if size is not None:
                    img = _resize(img, size)  # type: ignore[arg-type]
                if flipRGB:
                    img = img[:, :, ::-1]
                if output_dir:
                    arr = np.clip(img, 0, 255).astype(np.uint8)
                    if arr.ndim == 3 and arr.shape[2] == 1:
                        arr = arr[:, :, 0]
                    Image.fromarray(np.ascontiguousarray(arr)).save(os.path.join(output_dir, f"{cnt:03d}.jpg"))
                if vizshape is not None:
                    pending.append(img)
                if cnt >= number:
                    return
            if vizshape is not None and len(pending) >= vizshape[0] * vizshape[1]:
                n = vizshape[0] * vizshape[1]
                stack_patches(pending[:n], nr_row=vizshape[0], nr_col=vizshape[1], viz=True)
                pending = pending[n:]
        if not got_any:
            raise ValueError(f"dump_dataflow_images: the DataFlow {df!r} produced no datapoint")


def intensity_to_rgb(intensity: np.ndarray, cmap: str = "cubehelix", normalize: bool = False) -> np.ndarray:
    """Colour a 2D array of intensities in [0, 1] with a matplotlib colormap; returns float32 HxWx3 in [0, 255].

    :param cmap: a matplotlib colormap name (needs matplotlib).
    :param normalize: first rescale ``intensity`` to span [0, 1].
    """
    intensity = np.asarray(intensity)
    if intensity.ndim != 2:
        raise ValueError(f"intensity_to_rgb: expected a 2D array, got shape {intensity.shape}")
    try:
        import matplotlib
    except ImportError:
        raise ImportError("intensity_to_rgb needs matplotlib (pip install matplotlib)") from None
    x = intensity.astype("float64")
    if normalize:
        x = x - x.min()
        m = x.max()
        if m > 0:
            x = x / m
    colored = matplotlib.colormaps[cmap](x)[..., :3]
    return colored.astype(np.float32) * 255.0


def _font(font_scale: float) -> Any:
    from PIL import ImageFont

    size = max(8, int(round(font_scale * 30)))
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has one fixed-size default font
        return ImageFont.load_default()


def draw_text(img: np.ndarray, pos: tuple[float, float], text: str, color: Sequence[int],
              font_scale: float = 0.4) -> np.ndarray:
    """Write ``text`` in light gray on a box of ``color`` whose bottom-left corner is ``pos = (x, y)`` (moved
    inside the image if needed). Returns a new ``uint8`` image; ``img`` is not modified."""
    from PIL import Image, ImageDraw

    arr = np.asarray(img).astype(np.uint8)
    gray = arr.ndim == 2
    pil = Image.fromarray(np.repeat(arr[:, :, None], 3, axis=2) if gray else arr)
    draw = ImageDraw.Draw(pil)
    font = _font(font_scale)
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    tw, th = right - left, bottom - top
    x0, y0 = int(pos[0]), int(pos[1])
    x0 = min(x0, arr.shape[1] - tw)
    y0 = max(y0, int(1.15 * th))
    fill = tuple(int(c) for c in color)
    draw.rectangle([x0, y0 - int(1.3 * th), x0 + tw, y0], fill=fill)
    draw.text((x0, y0 - int(1.3 * th) - top + int(0.15 * th)), text, fill=(222, 222, 222), font=font)
    out = np.asarray(pil).copy()
    return out


def draw_boxes(im: np.ndarray, boxes: Any, labels: Sequence[str] | None = None,
               color: Sequence[int] | None = None) -> np.ndarray:
    """Draw 1-pixel rectangles for ``boxes`` (Nx4, rows ``[x1, y1, x2, y2]`` in pixels, inclusive) and their
    ``labels``, the largest first. Returns a new HxWx3 ``uint8`` image (a gray ``im`` is made 3-channel);
    ``im`` is not modified. ``color`` defaults to ``(15, 128, 15)``."""
    from PIL import Image, ImageDraw

    boxes = np.asarray(boxes, dtype="int32").reshape(-1, 4)
    if labels is not None and len(labels) != len(boxes):
        raise ValueError(f"draw_boxes: {len(labels)} labels for {len(boxes)} boxes")
    im = np.asarray(im)
    if len(boxes):
        areas = (boxes[:, 2] - boxes[:, 0] + 1) * (boxes[:, 3] - boxes[:, 1] + 1)
        if areas.min() <= 0:
            raise ValueError(f"draw_boxes: box {boxes[int(areas.argmin())].tolist()} has x2 < x1 or y2 < y1")
        if boxes[:, 0].min() < 0 or boxes[:, 1].min() < 0 or boxes[:, 2].max() > im.shape[1] or \
                boxes[:, 3].max() > im.shape[0]:
            raise ValueError(f"draw_boxes: boxes go outside the image of shape {im.shape}:\n{boxes}")
        order = np.argsort(-areas, kind="stable")
    else:
        order = np.zeros(0, dtype=int)
    out = im.astype(np.uint8)
    if out.ndim == 3 and out.shape[2] == 1:
        out = out[:, :, 0]
    if out.ndim == 2:
        out = np.repeat(out[:, :, None], 3, axis=2)
    out = out.copy()
    fill = tuple(int(c) for c in (color if color is not None else (15, 128, 15)))
    for i in order:
        x1, y1, x2, y2 = (int(v) for v in boxes[i])
        if labels is not None:
            out = draw_text(out, (x1, y1), labels[i], color=fill)
        pil = Image.fromarray(out)
        ImageDraw.Draw(pil).rectangle([x1, y1, x2, y2], outline=fill, width=1)
        out = np.asarray(pil).copy()
    return out


def draw_mask(im: np.ndarray, mask: np.ndarray, alpha: float = 0.5, color: Sequence[float] | None = None) -> np.ndarray:
    """Blend ``color`` into ``im`` where ``mask`` is nonzero: ``im * (1 - alpha) + color * alpha`` there.

    :param im: HxWx3 image in [0, 255]; not modified.
    :param mask: HxW array (nonzero = inside).
    :param color: 3 values in [0, 255]; a random entry of ``PALETTE_RGB`` if None.
    :returns: a new ``uint8`` image.
    """
    im = np.asarray(im)
    mask = np.asarray(mask)
    if im.ndim != 3 or im.shape[2] != 3:
        raise ValueError(f"draw_mask: expected an HxWx3 image, got shape {im.shape}")
    if mask.shape != im.shape[:2]:
        raise ValueError(f"draw_mask: the mask has shape {mask.shape} but the image is {im.shape[:2]}")
    if color is None:
        from trainbus.utils.palette import PALETTE_RGB

        color = PALETTE_RGB[np.random.randint(len(PALETTE_RGB))]
    col = np.asarray(color, dtype=np.float32)[::1]
    inside = (mask != 0)[:, :, None]
    blended = np.where(inside, im * (1 - alpha) + col * alpha, im)
    return np.clip(np.round(blended), 0, 255).astype(np.uint8)
