"""Photometric, noise and conversion augmentors of trainbus.dataflow.imgaug: values and dtypes."""

from __future__ import annotations

import numpy as np
import pytest

from trainbus.dataflow import imgaug
from optdeps import import_opt  # tests/_support

cv2 = import_opt("image", "cv2")  # trainbus-dataflow[image], kept outside site-packages
pytestmark = pytest.mark.usefixtures("opencv_importable")


def _img(h=6, w=8, c=3, seed=0):
    return np.random.RandomState(seed).randint(0, 256, size=(h, w, c)).astype("uint8")


def _seed(aug, seed):
    aug.rng = np.random.RandomState(seed)
    return aug


def test_brightness_adds_drawn_value_and_clips_uint8():
    img = _img()
    v = np.float32(np.random.RandomState(1).uniform(-50, 50))
    out = _seed(imgaug.Brightness(50), 1).augment(img)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, np.clip(img.astype("float32") + v, 0, 255).astype("uint8"))


def test_brightness_float_input_clip_flag():
    img = np.array([[[250.0, 10.0, 100.0]]], dtype="float32")
    out = _seed(imgaug.Brightness(50, clip=False), 1).augment(img)
    v = np.float32(np.random.RandomState(1).uniform(-50, 50))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, img + v)
    out_c = _seed(imgaug.Brightness(50, clip=True), 1).augment(img)
    np.testing.assert_allclose(out_c, np.clip(img + v, 0, 255))
    with pytest.raises(ValueError, match="delta"):
        imgaug.Brightness(0)


def test_brightness_scale_and_contrast():
    img = _img()
    s = np.float32(np.random.RandomState(2).uniform(0.5, 1.5))
    out = _seed(imgaug.BrightnessScale((0.5, 1.5)), 2).augment(img)
    np.testing.assert_array_equal(out, np.clip(img.astype("float32") * s, 0, 255).astype("uint8"))
    r = np.float32(np.random.RandomState(3).uniform(0.5, 1.5))
    out = _seed(imgaug.Contrast((0.5, 1.5)), 3).augment(img)
    mean = img.mean(axis=(0, 1), keepdims=True)
    np.testing.assert_array_equal(out, np.clip(img * r + mean * (1 - r), 0, 255).astype("uint8"))
    out_rgb = _seed(imgaug.Contrast((0.5, 1.5), rgb=True), 3).augment(img)
    gmean = cv2.cvtColor(img.astype("float32"), cv2.COLOR_RGB2GRAY).mean()
    np.testing.assert_array_equal(out_rgb, np.clip(img * r + gmean * (1 - r), 0, 255).astype("uint8"))


def test_saturation_blends_with_gray():
    img = _img()
    v = 1 + np.float32(np.random.RandomState(4).uniform(-0.4, 0.4))
    out = _seed(imgaug.Saturation(0.4, rgb=False), 4).augment(img)
    gray = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    expect = np.clip(img * v + (gray * (1 - v))[:, :, None], 0, 255).astype("uint8")
    np.testing.assert_array_equal(out, expect)
    with pytest.raises(ValueError, match="alpha"):
        imgaug.Saturation(1.0)


def test_lighting_adds_pca_offset():
    img = _img().astype("float32")
    eigval = [0.2175, 0.0188, 0.0045]
    eigvec = [[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]]
    w = (np.random.RandomState(5).randn(3) * 10).astype("float32")
    out = _seed(imgaug.Lighting(10, eigval, eigvec, clip=False), 5).augment(img)
    inc = np.asarray(eigvec, "float32") @ (w * np.asarray(eigval, "float32"))
    np.testing.assert_allclose(out, img + inc, rtol=1e-5)
    with pytest.raises(ValueError, match="3 channels"):
        imgaug.Lighting(1, eigval, eigvec).augment(_img(c=1))
    with pytest.raises(ValueError, match="eigvec"):
        imgaug.Lighting(1, eigval, np.eye(2))


def test_hue_shift_uint8_matches_hsv_arithmetic():
    img = _img()
    hue = np.float32(np.random.RandomState(6).uniform(-20, 20))
    out = _seed(imgaug.Hue((-20, 20), rgb=True), 6).augment(img)
    hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV)
    hsv[..., 0] = (hsv[..., 0] + hue) % 180
    np.testing.assert_array_equal(out, cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB))


def test_gamma_lookup_table():
    img = _img()
    g = np.float32(np.random.RandomState(7).uniform(-0.5, 0.5))
    out = _seed(imgaug.Gamma(), 7).augment(img)
    lut = ((np.arange(256, dtype="float32") / 255) ** (1.0 / (1.0 + g)) * 255).astype("uint8")
    np.testing.assert_array_equal(out, lut[img])
    outf = _seed(imgaug.Gamma(), 7).augment(img.astype("float32"))
    assert outf.dtype == np.float32
    np.testing.assert_array_equal(outf, lut[img].astype("float32"))


def test_clip_and_normalizers():
    img = _img().astype("float32")
    np.testing.assert_array_equal(imgaug.Clip(30, 100).augment(img), np.clip(img, 30, 100))
    mm = imgaug.MinMaxNormalize(-1, 1, all_channel=False).augment(img)
    assert mm.dtype == np.float32
    np.testing.assert_allclose(mm.min(axis=(0, 1)), [-1, -1, -1])
    np.testing.assert_allclose(mm.max(axis=(0, 1)), [1, 1, 1])
    mv = imgaug.MeanVarianceNormalize().augment(_img())
    assert mv.dtype == np.float32
    assert abs(mv.mean()) < 1e-5 and abs(mv.std() - 1) < 1e-4


def test_gaussian_blur_equals_cv2():
    img = _img(12, 12)
    ref = np.random.RandomState(8)
    size = ref.randint(0, 3, size=(2,)) * 2 + 1
    sigma = ref.uniform(0.5, 1.5, (2,)).astype("float32")
    out = _seed(imgaug.GaussianBlur(size_range=(0, 3), sigma_range=(0.5, 1.5)), 8).augment(img)
    k = int(size[0])
    expect = cv2.GaussianBlur(img, (k, k), sigmaX=float(sigma[0]), sigmaY=float(sigma[0]),
                              borderType=cv2.BORDER_REPLICATE)
    np.testing.assert_array_equal(out, expect)


def test_noise_augmentors():
    img = _img()
    noise = np.random.RandomState(9).randn(*img.shape)
    out = _seed(imgaug.GaussianNoise(sigma=10), 9).augment(img)
    np.testing.assert_array_equal(out, np.clip(img + noise * 10, 0, 255).astype("uint8"))

    u = np.random.RandomState(10).uniform(0, 1, img.shape)
    out = _seed(imgaug.SaltPepperNoise(0.1, 0.2), 10).augment(img.copy())
    expect = img.copy()
    expect[u > 0.9] = 255
    expect[u < 0.2] = 0
    np.testing.assert_array_equal(out, expect)
    with pytest.raises(ValueError, match="sum"):
        imgaug.SaltPepperNoise(0.6, 0.6)

    q = np.random.RandomState(11).randint(40, 100)
    out = _seed(imgaug.JpegNoise(), 11).augment(img)
    enc = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, int(q)])[1]
    np.testing.assert_array_equal(out, cv2.imdecode(enc, cv2.IMREAD_COLOR))


def test_conversions():
    img = _img()
    gray = imgaug.Grayscale().augment(img)
    assert gray.shape == (6, 8, 1)
    np.testing.assert_array_equal(gray[:, :, 0], cv2.cvtColor(img, cv2.COLOR_BGR2GRAY))
    g3 = imgaug.Grayscale(rgb=True, keepshape=True).augment(img)
    assert g3.shape == img.shape
    np.testing.assert_array_equal(g3[:, :, 2], cv2.cvtColor(img, cv2.COLOR_RGB2GRAY))
    assert imgaug.Grayscale(keepdims=False).augment(img).shape == (6, 8)
    with pytest.raises(ValueError, match="keepdims"):
        imgaug.Grayscale(keepdims=False, keepshape=True)
    np.testing.assert_array_equal(imgaug.ColorSpace(cv2.COLOR_BGR2HSV).augment(img),
                                  cv2.cvtColor(img, cv2.COLOR_BGR2HSV))
    f = np.array([[-3.0, 12.7, 300.0]], dtype="float32")
    np.testing.assert_array_equal(imgaug.ToUint8().augment(f), np.array([[0, 12, 255]], dtype="uint8"))
    assert imgaug.ToFloat32().augment(img).dtype == np.float32


def test_photometric_transforms_leave_coords_alone():
    img = _img()
    coords = np.array([[1.5, 2.5]], dtype="float32")
    for aug in [imgaug.Brightness(10), imgaug.Contrast((0.5, 1.5)), imgaug.GaussianNoise(), imgaug.ToFloat32(),
                imgaug.RandomCutout(2, 2)]:
        t = aug.get_transform(img)
        assert isinstance(t, imgaug.PhotometricTransform)
        np.testing.assert_array_equal(t.apply_coords(coords.copy()), coords)
