"""ImageFromFile and the augmentation dataflows (trainbus.dataflow.AugmentImageComponent and friends)."""

from __future__ import annotations

import numpy as np
import pytest

from trainbus.dataflow import (AugmentImageComponent, AugmentImageComponents, AugmentImageCoordinates, DataFromList,
                               ImageFromFile, imgaug)
from optdeps import import_opt  # tests/_support

cv2 = import_opt("image", "cv2")  # trainbus-dataflow[image], kept outside site-packages
pytestmark = pytest.mark.usefixtures("opencv_importable")


def _img(h=8, w=10, c=3, seed=0):
    return np.random.RandomState(seed).randint(0, 256, size=(h, w, c)).astype("uint8")


def _seed_all(aug_df, seed):
    for a in aug_df.augs.augmentors:
        a.rng = np.random.RandomState(seed)


@pytest.fixture
def image_files(tmp_path):
    imgs = [_img(6, 7, seed=i) for i in range(3)]
    paths = []
    for i, im in enumerate(imgs):
        p = tmp_path / f"im{i}.png"
        assert cv2.imwrite(str(p), im)
        paths.append(str(p))
    jpg = tmp_path / "im3.jpg"
    assert cv2.imwrite(str(jpg), _img(6, 7, seed=3), [cv2.IMWRITE_JPEG_QUALITY, 95])
    paths.append(str(jpg))
    return paths, imgs


def test_image_from_file_reads_rgb_png_and_jpeg(image_files):
    paths, imgs = image_files
    ds = ImageFromFile(paths)
    ds.reset_state()
    assert len(ds) == 4
    out = [dp[0] for dp in ds]
    for got, bgr in zip(out[:3], imgs):
        np.testing.assert_array_equal(got, bgr[:, :, ::-1])  # PNG is lossless; RGB order
    np.testing.assert_array_equal(out[3], cv2.imread(paths[3])[:, :, ::-1])
    assert all(len(dp) == 1 for dp in ds)


def test_image_from_file_grayscale_resize_and_shuffle(image_files):
    paths, imgs = image_files
    ds = ImageFromFile(paths[:3], channel=1, resize=(4, 5))
    ds.reset_state()
    out = [dp[0] for dp in ds]
    assert out[0].shape == (4, 5, 1)
    gray = cv2.imread(paths[0], cv2.IMREAD_GRAYSCALE)
    np.testing.assert_array_equal(out[0][:, :, 0], cv2.resize(gray, (5, 4)))

    ds = ImageFromFile(paths[:3], shuffle=True)
    ds.reset_state()
    ds.rng = np.random.RandomState(4)
    order = np.arange(3)
    np.random.RandomState(4).shuffle(order)
    got = [dp[0] for dp in ds]
    for g, k in zip(got, order):
        np.testing.assert_array_equal(g, imgs[k][:, :, ::-1])


def test_image_from_file_errors(tmp_path):
    with pytest.raises(ValueError, match="no image files"):
        ImageFromFile([])
    with pytest.raises(ValueError, match="channel"):
        ImageFromFile(["a.png"], channel=2)
    missing = str(tmp_path / "nope.png")
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    for path, why in [(missing, "does not exist"), (str(bad), "cannot decode")]:
        ds = ImageFromFile([path])
        ds.reset_state()
        with pytest.raises(OSError, match=why) as e:
            list(ds)
        assert path in str(e.value)


def test_augment_image_component_values_order_and_copy():
    imgs = [_img(seed=i) for i in range(4)]
    src = DataFromList([[im, i] for i, im in enumerate(imgs)], shuffle=False)
    ds = AugmentImageComponent(src, [imgaug.RandomCrop((4, 5)), imgaug.Flip(horiz=True)])
    ds.reset_state()
    _seed_all(ds, 3)
    crop_ref, flip_ref = np.random.RandomState(3), np.random.RandomState(3)
    out = list(ds)
    assert [dp[1] for dp in out] == [0, 1, 2, 3]
    for dp, im in zip(out, imgs):
        y0, x0 = crop_ref.randint(5), crop_ref.randint(6)
        expect = im[y0:y0 + 4, x0:x0 + 5]
        if flip_ref.uniform() < 0.5:
            expect = expect[:, ::-1]
        np.testing.assert_array_equal(dp[0], expect)
    assert len(ds) == 4


def test_augment_image_component_copy_protects_input():
    im = _img()
    orig = im.copy()
    cut = imgaug.RandomCutout(3, 3, fill=0)
    ds = AugmentImageComponent(DataFromList([[im]], shuffle=False), [cut])
    ds.reset_state()
    list(ds)
    np.testing.assert_array_equal(im, orig)
    ds = AugmentImageComponent(DataFromList([[im]], shuffle=False), [cut], copy=False)
    ds.reset_state()
    list(ds)
    assert (im == 0).sum() >= 9  # modified in place without the copy


class _CountingArray(np.ndarray):
    """An image that counts how often it (or a view of it) is copied."""

    copies = 0

    def copy(self, *args, **kwargs):
        _CountingArray.copies += 1
        return super().copy(*args, **kwargs)


def _augment_both_ways(make_augs, im, seed=5):
    """AugmentImageComponent's output for ``im`` (copy=True), and what the augmentors give for a copy made first
    (the same seeds); also the number of copies the dataflow made of ``im``."""
    augs = imgaug.AugmentorList(make_augs())
    for a in augs.augmentors:
        a.rng = np.random.RandomState(seed)
    ref = augs.augment(np.array(im))
    counted = im.view(_CountingArray)
    ds = AugmentImageComponent(DataFromList([[counted]], shuffle=False), make_augs())
    ds.reset_state()
    _seed_all(ds, seed)
    _CountingArray.copies = 0
    (dp,) = list(ds)
    return dp[0], ref, _CountingArray.copies


def test_augment_image_component_copies_only_when_an_augmentor_may_write():
    big = _img(12, 14)
    for im in (_img(8, 10), big[2:10, 1:11]):  # a contiguous image and a window of a bigger one
        orig = im.copy()
        # Flip (a new array when it flips), crop (a view), resize (a new array): the input is never written to.
        out, ref, copies = _augment_both_ways(
            lambda: [imgaug.Flip(horiz=True, prob=1.0), imgaug.RandomCrop((5, 6)), imgaug.Resize((8, 10))], im)
        np.testing.assert_array_equal(out, ref)
        assert copies == 0 and not np.shares_memory(out, im)
        # Only views: the crop is taken from a copy, with the layout a crop of a copy has.
        out, ref, copies = _augment_both_ways(lambda: [imgaug.RandomCrop((5, 6)), imgaug.CenterCrop(4)], im)
        np.testing.assert_array_equal(out, ref)
        assert copies == 1 and not np.shares_memory(out, im)
        assert out.strides == ref.strides == (10 * 3, 3, 1)

        def write_corner(x):
            x[0, 0] = 255
            return x

        # A writing augmentor after a crop: the copy comes first, the crop is taken again from it.
        out, ref, copies = _augment_both_ways(lambda: [imgaug.RandomCrop((5, 6)), imgaug.MapImage(write_corner)], im)
        np.testing.assert_array_equal(out, ref)
        assert copies == 1 and out[0, 0].tolist() == [255, 255, 255]
        np.testing.assert_array_equal(im, orig)
    np.testing.assert_array_equal(big, _img(12, 14))


def test_augment_image_component_dict_datapoints_and_index():
    src = DataFromList([{"label": 1, "image": _img()}], shuffle=False)
    ds = AugmentImageComponent(src, [imgaug.Flip(horiz=True, prob=1.0)], index="image")
    ds.reset_state()
    (dp,) = list(ds)
    assert dp["label"] == 1
    np.testing.assert_array_equal(dp["image"], _img()[:, ::-1])


def test_catch_exceptions_skips_bad_datapoints():
    dps = [[_img(10, 10)], [_img(3, 3)], [_img(12, 12)]]
    ds = AugmentImageComponent(DataFromList(dps, shuffle=False), [imgaug.RandomCrop(5)])
    ds.reset_state()
    with pytest.raises(ValueError, match="RandomCrop"):
        list(ds)
    ds = AugmentImageComponent(DataFromList(dps, shuffle=False), [imgaug.RandomCrop(5)], catch_exceptions=True)
    ds.reset_state()
    out = list(ds)
    assert [dp[0].shape for dp in out] == [(5, 5, 3), (5, 5, 3)]
    ds = AugmentImageComponent(DataFromList([["not an image"]], shuffle=False), [imgaug.Flip(horiz=True)])
    ds.reset_state()
    with pytest.raises(TypeError, match=r"AugmentImageComponent\(index=0\).*str"):
        list(ds)


def test_reset_state_reseeds_augmentors():
    src = DataFromList([[_img(30, 30)]] * 6, shuffle=False)
    aug = imgaug.RandomCrop(3)
    ds = AugmentImageComponent(src, [aug])
    old = aug.rng
    ds.reset_state()
    assert aug.rng is not old


def test_augment_image_components_share_one_transform():
    img = _img(12, 14)
    mask = (np.arange(12 * 14).reshape(12, 14) % 7).astype("uint8")
    kp = np.array([[3.0, 4.0], [10.0, 2.0]], dtype="float32")
    src = DataFromList([[img, mask, kp, "meta"]], shuffle=False)
    augs = [imgaug.RandomCrop((6, 8)), imgaug.Flip(horiz=True, prob=1.0)]
    ds = AugmentImageComponents(src, augs, index=(0, 1), coords_index=(2,))
    ds.reset_state()
    augs[0].rng = np.random.RandomState(9)
    ref = np.random.RandomState(9)
    y0, x0 = ref.randint(7), ref.randint(7)
    (dp,) = list(ds)
    np.testing.assert_array_equal(dp[0], img[y0:y0 + 6, x0:x0 + 8][:, ::-1])
    np.testing.assert_array_equal(dp[1], mask[y0:y0 + 6, x0:x0 + 8][:, ::-1])
    np.testing.assert_allclose(dp[2], np.stack([8 - (kp[:, 0] - x0), kp[:, 1] - y0], axis=1))
    assert dp[3] == "meta"
    np.testing.assert_array_equal(src.lst[0][2], [[3.0, 4.0], [10.0, 2.0]])  # input untouched


def test_augment_image_coordinates():
    img = _img(10, 10)
    coords = np.array([[2.0, 3.0]], dtype="float32")
    src = DataFromList([(img, coords)], shuffle=False)
    ds = AugmentImageCoordinates(src, [imgaug.Flip(vert=True, prob=1.0), imgaug.Resize((20, 5))])
    ds.reset_state()
    (dp,) = list(ds)
    np.testing.assert_array_equal(dp[0], cv2.resize(np.ascontiguousarray(img[::-1]), (5, 20)))
    np.testing.assert_allclose(dp[1], [[1.0, 14.0]])
    np.testing.assert_array_equal(coords, [[2.0, 3.0]])
    bad = DataFromList([(img, np.array([1, 2, 3]))], shuffle=False)
    ds = AugmentImageCoordinates(bad, [imgaug.Flip(vert=True)], coords_index=1)
    ds.reset_state()
    with pytest.raises(ValueError, match=r"coords_index=1.*Nx2.*shape \(3,\)"):
        list(ds)


def test_augmentation_dataflow_argument_errors():
    src = DataFromList([[_img()]], shuffle=False)
    with pytest.raises(TypeError, match="list of augmentors"):
        AugmentImageComponent(src, imgaug.Flip(horiz=True))
    with pytest.raises(ValueError, match="index"):
        AugmentImageComponents(src, [imgaug.Flip(horiz=True)], index=())
