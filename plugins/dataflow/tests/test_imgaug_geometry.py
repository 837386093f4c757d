"""Geometric augmentors and transforms of trainbus.dataflow.imgaug, checked against plain NumPy / OpenCV."""

from __future__ import annotations

import numpy as np
import pytest

import trainbus.dataflow.imgaug as imgaug
from trainbus.dataflow.imgaug import (CenterCrop, CropTransform, Flip, FlipTransform, NoOpTransform, RandomCrop,
                                      Resize, ResizeTransform, TransformList)
from optdeps import import_opt  # tests/_support

cv2 = import_opt("image", "cv2")  # trainbus-dataflow[image], kept outside site-packages
pytestmark = pytest.mark.usefixtures("opencv_importable")


def _img(h=7, w=9, c=3, seed=0):
    return np.random.RandomState(seed).randint(0, 256, size=(h, w, c)).astype("uint8")


def _seed(aug, seed):
    aug.rng = np.random.RandomState(seed)
    return aug


def _marked(h, w, y, x):
    img = np.zeros((h, w), dtype="float32")
    img[y, x] = 1.0
    return img


def _peak(img):
    y, x = np.unravel_index(np.argmax(img), img.shape[:2])
    return x, y


def test_flip_horizontal_equals_reversed_columns_and_moves_coords():
    img = _img()
    t = Flip(horiz=True, prob=1.0).get_transform(img)
    assert isinstance(t, FlipTransform)
    out = t.apply_image(img)
    np.testing.assert_array_equal(out, img[:, ::-1])
    assert out.flags.c_contiguous  # later OpenCV calls take it without a slow strided copy
    gray = _img(c=1)
    np.testing.assert_array_equal(t.apply_image(gray), gray[:, ::-1])
    np.testing.assert_array_equal(t.apply_image(gray.astype(np.int64)), gray[:, ::-1])
    coords = np.array([[0.0, 1.0], [2.5, 3.0]], dtype="float32")
    np.testing.assert_allclose(t.apply_coords(coords), [[9.0, 1.0], [6.5, 3.0]])


def test_flip_vertical_and_probability_follow_rng():
    img = _img()
    aug = _seed(Flip(vert=True, prob=0.5), 3)
    draws = np.random.RandomState(3).uniform(0, 1, 20)
    for u in draws:
        out = aug.augment(img)
        np.testing.assert_array_equal(out, img[::-1] if u < 0.5 else img)


def test_flip_bad_arguments():
    with pytest.raises(ValueError, match="two Flip"):
        Flip(horiz=True, vert=True)
    with pytest.raises(ValueError, match="horiz=True or vert=True"):
        Flip()


def test_random_crop_equals_slicing_at_drawn_offset():
    img = _img(12, 15)
    aug = _seed(RandomCrop((5, 6)), 11)
    ref = np.random.RandomState(11)
    for _ in range(10):
        y0, x0 = ref.randint(12 - 5 + 1), ref.randint(15 - 6 + 1)
        t = aug.get_transform(img)
        assert (t.y0, t.x0, t.h, t.w) == (y0, x0, 5, 6)
        np.testing.assert_array_equal(t.apply_image(img), img[y0:y0 + 5, x0:x0 + 6])


def test_crop_larger_than_image_names_augmentor_and_sizes():
    with pytest.raises(ValueError, match=r"RandomCrop\(crop_shape=\(20, 20\)\).*20x20.*\(7, 9, 3\)"):
        RandomCrop(20).augment(_img())
    with pytest.raises(ValueError, match=r"CenterCrop.*8x10"):
        CenterCrop((8, 10)).augment(_img())
    with pytest.raises(ValueError, match="crop_shape"):
        RandomCrop("big")


def test_center_crop():
    img = _img(9, 12)
    out = CenterCrop((4, 5)).augment(img)
    np.testing.assert_array_equal(out, img[2:6, 3:8])


def test_resize_equals_cv2_and_keeps_channel_axis():
    img = _img(10, 14)
    out = Resize((5, 8), interp=cv2.INTER_AREA).augment(img)
    np.testing.assert_array_equal(out, cv2.resize(img, (8, 5), interpolation=cv2.INTER_AREA))
    gray = _img(10, 14, 1)
    out1 = Resize(6).augment(gray)
    assert out1.shape == (6, 6, 1)
    np.testing.assert_array_equal(out1[:, :, 0], cv2.resize(gray, (6, 6)))


def test_resize_transform_coords_and_wrong_size():
    t = ResizeTransform(10, 20, 5, 40, cv2.INTER_LINEAR)
    np.testing.assert_allclose(t.apply_coords(np.array([[4.0, 6.0]])), [[8.0, 3.0]])
    with pytest.raises(ValueError, match=r"\(10, 20\).*\(3, 3, 3\)"):
        t.apply_image(_img(3, 3))


def test_resize_shortest_edge_and_random_resize():
    img = _img(10, 25)
    out = imgaug.ResizeShortestEdge(20).augment(img)
    assert out.shape == (20, 50, 3)
    aug = _seed(imgaug.RandomResize((0.5, 2.0), aspect_ratio_thres=0), 5)
    ref = np.random.RandomState(5)
    for _ in range(5):
        s = np.float32(ref.uniform(0.5, 2.0))
        t = aug.get_transform(img)
        assert (t.new_w, t.new_h) == (int(s * 25 + 0.5), int(s * 10 + 0.5))
    with pytest.raises(ValueError, match="both be scale factors"):
        imgaug.RandomResize((0.5, 2.0), (10, 20))


def test_transpose_image_and_coords():
    img = _img(4, 6)
    t = imgaug.Transpose(prob=1.0).get_transform(img)
    np.testing.assert_array_equal(t.apply_image(img), img.transpose(1, 0, 2))
    np.testing.assert_array_equal(t.apply_coords(np.array([[1.0, 2.0]])), [[2.0, 1.0]])
    assert isinstance(imgaug.Transpose(prob=0.0).get_transform(img), NoOpTransform)


@pytest.mark.parametrize("aug", [
    Flip(horiz=True, prob=1.0), Flip(vert=True, prob=1.0), RandomCrop((9, 11)), CenterCrop(8),
    imgaug.Transpose(prob=1.0), imgaug.Shift(0.3, 0.3, border=cv2.BORDER_CONSTANT),
    imgaug.CenterPaste((20, 25)), imgaug.RandomPaste((20, 25)),
])
def test_marked_pixel_moves_where_apply_coords_says(aug):
    # A pixel's center is at (x + 0.5, y + 0.5) in the coordinate convention of flips and resizes.
    for seed in range(4):
        _seed(aug, seed)
        img = _marked(13, 15, 6, 8)
        t = aug.get_transform(img)
        out = t.apply_image(img.copy())
        x, y = t.apply_coords(np.array([[8.5, 6.5]], dtype="float32"))[0]
        assert _peak(out) == (int(np.floor(x)), int(np.floor(y))), (seed, out.shape, x, y)


def test_affine_coords_agree_with_warped_image():
    aug = imgaug.Affine(scale=(0.8, 1.2), translate_frac=(0.1, 0.1), rotate_max_deg=30, shear=10,
                        border=cv2.BORDER_CONSTANT)
    for seed in range(5):
        _seed(aug, seed)
        img = np.zeros((31, 31), dtype="float32")
        img[14:17, 11:14] = 1.0  # a 3x3 blob centered on pixel (x=12, y=15)
        t = aug.get_transform(img)
        out = t.apply_image(img)
        x, y = t.apply_coords(np.array([[12.0, 15.0]]))[0]  # warpAffine maps pixel centers at integer coords
        ys, xs = np.nonzero(out > 0)
        cx, cy = np.average(xs, weights=out[ys, xs]), np.average(ys, weights=out[ys, xs])
        assert abs(cx - x) < 0.3 and abs(cy - y) < 0.3


def test_rotation_by_multiples_of_90_is_exact():
    img = _img(9, 9)
    aug = _seed(imgaug.Rotation(180, center_range=(0.5, 0.5), step_deg=90), 0)
    seen = set()
    for _ in range(12):
        out = aug.augment(img)
        k = next(k for k in range(4) if np.array_equal(out, np.rot90(img, k)))
        seen.add(k)
    assert len(seen) >= 2
    with pytest.raises(ValueError, match="step_deg"):
        imgaug.Rotation(90, step_deg=45)


def test_rotation_and_crop_valid_has_no_border_pixels():
    img = np.full((40, 60, 3), 200, dtype="uint8")
    aug = _seed(imgaug.RotationAndCropValid(30), 2)
    for _ in range(5):
        out = aug.augment(img)
        assert out.shape[0] <= 40 and out.shape[1] <= 60
        assert out[1:-1, 1:-1].min() == 200 and out.mean() > 199  # the border only bleeds into corner pixels
    assert imgaug.RotationAndCropValid.largest_rotated_rect(100, 50, 0) == (100, 50)
    assert imgaug.RotationAndCropValid.largest_rotated_rect(100, 100, 45) == (71, 71)


def test_shift_is_an_integer_translation():
    img = _img(10, 10)
    aug = _seed(imgaug.Shift(0.3, 0.3), 4)
    ref = np.random.RandomState(4)
    dx = float(np.round(np.float32(ref.uniform(-3.0, 3.0))))
    dy = float(np.round(np.float32(ref.uniform(-3.0, 3.0))))
    t = aug.get_transform(img)
    np.testing.assert_allclose(t.mat, [[1, 0, dx], [0, 1, dy]])
    out = t.apply_image(img)
    sy, sx = slice(max(0, int(dy)), 10 + min(0, int(dy))), slice(max(0, int(dx)), 10 + min(0, int(dx)))
    ty, tx = slice(max(0, -int(dy)), 10 - max(0, int(dy))), slice(max(0, -int(dx)), 10 - max(0, int(dx)))
    np.testing.assert_array_equal(out[sy, sx], img[ty, tx])


def test_googlenet_crop_and_resize_output_and_fallback():
    img = _img(50, 60)
    aug = _seed(imgaug.GoogleNetRandomCropAndResize(target_shape=16), 0)
    for _ in range(5):
        t = aug.get_transform(img)
        assert isinstance(t, TransformList)
        assert t.apply_image(img).shape == (16, 16, 3)
    # No crop with an aspect ratio in [50, 60] fits: falls back to ResizeShortestEdge + CenterCrop.
    t = _seed(imgaug.GoogleNetRandomCropAndResize(aspect_ratio_range=(50, 60), target_shape=16), 0).get_transform(img)
    resized = cv2.resize(img, (19, 16))
    np.testing.assert_array_equal(t.apply_image(img), resized[:, 1:17])


def test_random_crop_random_shape_and_cutout():
    img = _img(20, 20)
    aug = _seed(imgaug.RandomCropRandomShape(5, 6, 10, 12), 1)
    for _ in range(10):
        out = aug.augment(img)
        assert 6 <= out.shape[0] <= 12 and 5 <= out.shape[1] <= 10
    cut = _seed(imgaug.RandomCutout((2, 5), 3, fill=7), 2)
    ref = np.random.RandomState(2)
    h = ref.randint(2, 5)
    x0, y0 = ref.randint(0, 20 + 1 - 3), ref.randint(0, 20 + 1 - h)
    out = cut.augment(img.copy())
    expect = img.copy()
    expect[y0:y0 + h, x0:x0 + 3] = 7
    np.testing.assert_array_equal(out, expect)


def test_paste_places_image_on_canvas():
    img = _img(4, 5)
    out = imgaug.CenterPaste((8, 9), imgaug.ConstantBackgroundFiller(3)).augment(img)
    expect = np.full((8, 9, 3), 3, dtype="uint8")
    expect[2:6, 2:7] = img
    np.testing.assert_array_equal(out, expect)
    with pytest.raises(ValueError, match="does not fit"):
        imgaug.CenterPaste((3, 3)).augment(img)
    with pytest.raises(ValueError, match="must be larger"):
        imgaug.RandomPaste((4, 9)).augment(img)


def test_transform_list_composition_and_missing_methods():
    img = _img(6, 8)
    t = TransformList([CropTransform(1, 2, 4, 5)]) + FlipTransform(4, 5)
    assert len(t.tfms) == 2
    np.testing.assert_array_equal(t.apply_image(img), img[1:5, 2:7][:, ::-1])
    np.testing.assert_allclose(t.apply_coords(np.array([[3.0, 2.0]])), [[4.0, 1.0]])
    t2 = NoOpTransform() + t
    assert isinstance(t2, TransformList) and len(t2.tfms) == 3
    with pytest.raises(NotImplementedError, match="CropTransform does not implement apply_segmentation"):
        CropTransform(0, 0, 1, 1).apply_segmentation(img)
    assert NoOpTransform().apply_anything(img) is img
    with pytest.raises(TypeError, match="not a Transform"):
        TransformList([lambda x: x])
    with pytest.raises(KeyError, match="apply_image"):
        imgaug.TransformFactory(name="x", image=lambda x: x)


def test_warp_affine_transform_equals_cv2():
    img = _img(10, 12)
    mat = cv2.getRotationMatrix2D((5.0, 4.0), 20, 1.1)
    t = imgaug.WarpAffineTransform(mat, (14, 11))
    np.testing.assert_array_equal(t.apply_image(img), cv2.warpAffine(img, mat, (14, 11)))
    np.testing.assert_allclose(t.apply_coords(np.array([[1.0, 2.0]])), [mat @ [1.0, 2.0, 1.0]], rtol=1e-6)
