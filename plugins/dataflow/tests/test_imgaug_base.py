"""Augmentor base classes of trainbus.dataflow.imgaug: random state, lists, meta augmentors, custom augmentors."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

import trainbus.dataflow.imgaug as imgaug
import trainbus_dataflow.imgaug.base as imgaug_base
from trainbus.dataflow.imgaug import AugmentorList, Flip, ImageAugmentor, RandomCrop

# the augmentors run OpenCV (trainbus-dataflow[image], kept outside site-packages)
pytestmark = pytest.mark.usefixtures("opencv_importable")


def _img(h=10, w=12, c=3, seed=0):
    return np.random.RandomState(seed).randint(0, 256, size=(h, w, c)).astype("uint8")


@pytest.fixture
def seeded(monkeypatch):
    """Make every reset_state seed with the given number."""

    def fix(seed):
        monkeypatch.setattr(imgaug_base, "get_rng", lambda obj: np.random.RandomState(seed))

    return fix


def _crops(aug, img, n=8):
    return [(t.y0, t.x0) for t in (aug.get_transform(img) for _ in range(n))]


def test_every_public_name_resolves_through_trainbus_dataflow():
    from trainbus.dataflow import imgaug as via_attr

    assert via_attr is imgaug
    names = ["ImageAugmentor", "Augmentor", "AugmentorList", "PhotometricAugmentor", "Transform", "ResizeTransform",
             "CropTransform", "FlipTransform", "TransformList", "WarpAffineTransform", "PhotometricTransform",
             "NoOpTransform", "TransformFactory", "RandomCrop", "CenterCrop", "RandomCropRandomShape",
             "GoogleNetRandomCropAndResize", "RandomCutout", "Shift", "Rotation", "RotationAndCropValid", "Affine",
             "Hue", "Brightness", "BrightnessScale", "Contrast", "MeanVarianceNormalize", "GaussianBlur", "Gamma",
             "Clip", "Saturation", "Lighting", "MinMaxNormalize", "RandomChooseAug", "MapImage", "Identity",
             "RandomApplyAug", "RandomOrderAug", "Flip", "Resize", "RandomResize", "ResizeShortestEdge",
             "Transpose", "JpegNoise", "GaussianNoise", "SaltPepperNoise", "CenterPaste", "BackgroundFiller",
             "ConstantBackgroundFiller", "RandomPaste", "ColorSpace", "Grayscale", "ToUint8", "ToFloat32",
             "IAAugmentor", "Albumentations", "GaussianDeform"]
    missing = [n for n in names if n not in imgaug.__all__ or not hasattr(imgaug, n)]
    assert missing == []
    assert imgaug.Augmentor is imgaug.ImageAugmentor


def test_same_seed_same_sequence_and_reset_state_reseeds(seeded):
    img = _img()
    seeded(42)
    a, b = RandomCrop(4), RandomCrop(4)
    ref = np.random.RandomState(42)
    expect = [(ref.randint(7), ref.randint(9)) for _ in range(8)]
    assert _crops(a, img) == expect
    assert _crops(b, img) == expect
    seeded(7)
    a.reset_state()
    ref = np.random.RandomState(7)
    assert _crops(a, img) == [(ref.randint(7), ref.randint(9)) for _ in range(8)]


def test_reset_state_gives_a_fresh_stream_per_object():
    img = _img(60, 60)
    a, b = RandomCrop(4), RandomCrop(4)
    assert isinstance(a.rng, np.random.RandomState)
    assert _crops(a, img, 12) != _crops(b, img, 12)
    old = a.rng
    a.reset_state()
    assert a.rng is not old


def test_rand_range_is_float32_uniform():
    aug = Flip(horiz=True)
    aug.rng = np.random.RandomState(3)
    v = aug._rand_range(2.0, 5.0)
    assert v.dtype == np.float32 and v.shape == ()
    assert v == np.float32(np.random.RandomState(3).uniform(2.0, 5.0))
    aug.rng = np.random.RandomState(3)
    np.testing.assert_array_equal(aug._rand_range(4.0, size=(3,)),
                                  np.random.RandomState(3).uniform(0, 4.0, (3,)).astype("float32"))


def test_rand_range_draws_are_those_of_uniform():
    aug = Flip(horiz=True)
    aug.rng, ref = np.random.RandomState(11), np.random.RandomState(11)
    for args in [(), (0, 1), (1.0,), (-3, 7), (0.25, 0.75), (np.float64(2.0), 3), (np.float32(0.5), 1.5)] * 50:
        v = aug._rand_range(*args)
        low, high = (0, args[0]) if len(args) == 1 else args or (0, 1.0)
        expect = ref.uniform(low, high, []).astype("float32")
        assert type(v) is np.ndarray and v.dtype == np.float32 and v.shape == () and v == expect


@pytest.mark.skipif(not hasattr(os, "register_at_fork"), reason="os.register_at_fork is POSIX-only")
def test_fork_reseeds_augmentors_in_the_child(monkeypatch):
    monkeypatch.setattr(imgaug_base, "get_rng", lambda obj: np.random.RandomState(os.getpid()))
    aug = RandomCrop(1)
    img = _img(1000, 1000)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(r)
            os.write(w, pickle.dumps(_crops(aug, img)))
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        child = pickle.loads(f.read())
    os.waitpid(pid, 0)
    ref = np.random.RandomState(pid)  # the child's reseeded stream
    assert child == [(ref.randint(1000), ref.randint(1000)) for _ in range(8)]
    assert child != _crops(aug, img)


def test_augmentor_list_draws_each_from_previous_output(seeded):
    seeded(5)
    img = _img(20, 24)
    augs = AugmentorList([RandomCrop((12, 16)), Flip(horiz=True, prob=1.0), imgaug.Resize((6, 8))])
    ref = np.random.RandomState(5)
    y0, x0 = ref.randint(9), ref.randint(9)
    expect = __import__("cv2").resize(np.ascontiguousarray(img[y0:y0 + 12, x0:x0 + 16][:, ::-1]), (8, 6))
    t = augs.get_transform(img)
    np.testing.assert_array_equal(t.apply_image(img), expect)
    # coordinates after the image: crop, flip, resize
    np.testing.assert_allclose(t.apply_coords(np.array([[x0 + 4.0, y0 + 6.0]])), [[(16 - 4.0) / 2, 6.0 / 2]])
    augs.reset_state()
    np.testing.assert_array_equal(augs.augment(img), expect)  # reseeded to the same stream


def test_augmentor_list_coords_before_image_is_a_clear_error():
    t = AugmentorList([Flip(horiz=True), RandomCrop(2)]).get_transform(_img())
    with pytest.raises(RuntimeError, match="before apply_image"):
        t.apply_coords(np.zeros((1, 2)))


def test_augmentor_list_bad_input():
    with pytest.raises(TypeError, match="list or tuple"):
        AugmentorList(Flip(horiz=True))
    with pytest.raises(TypeError, match=r"augmentors\[1\]"):
        AugmentorList([Flip(horiz=True), "flip"])
    with pytest.raises(TypeError, match="numpy array"):
        Flip(horiz=True).augment([[1, 2]])
    with pytest.raises(ValueError, match="shape"):
        AugmentorList([Flip(horiz=True)]).augment(np.zeros((2, 2, 2, 2)))


def test_random_apply_choose_order(seeded):
    img = _img()
    seeded(1)
    apply = imgaug.RandomApplyAug(Flip(horiz=True, prob=1.0), 0.5)
    ref = np.random.RandomState(1)
    for _ in range(10):
        p = ref.rand()  # the inner Flip (prob=1) draws from its own rng
        out = apply.augment(img)
        np.testing.assert_array_equal(out, img[:, ::-1] if p < 0.5 else img)

    seeded(2)
    choose = imgaug.RandomChooseAug([(imgaug.Identity(), 0.25), (Flip(vert=True, prob=1.0), 0.75)])
    ref = np.random.RandomState(2)
    for _ in range(10):
        k = ref.choice(2, p=[0.25, 0.75])
        np.testing.assert_array_equal(choose.augment(img), img if k == 0 else img[::-1])
    with pytest.raises(ValueError, match="sum to 1"):
        imgaug.RandomChooseAug([(imgaug.Identity(), 0.5), (imgaug.Identity(), 0.6)])

    seeded(3)
    add = imgaug.MapImage(lambda im: im + 1)
    dbl = imgaug.MapImage(lambda im: im * 2)
    order = imgaug.RandomOrderAug([add, dbl])
    ref = np.random.RandomState(3)
    x = np.array([[3.0]])
    for _ in range(6):
        perm = ref.permutation(2)
        assert order.augment(x)[0, 0] == ((3 + 1) * 2 if perm[0] == 0 else 3 * 2 + 1)


def test_map_image_with_and_without_coord_func():
    t = imgaug.MapImage(lambda im: im[::2], lambda c: c / 2).get_transform(_img())
    np.testing.assert_array_equal(t.apply_coords(np.array([[4.0, 2.0]])), [[2.0, 1.0]])
    t2 = imgaug.MapImage(lambda im: im).get_transform(_img())
    with pytest.raises(NotImplementedError, match="apply_coords"):
        t2.apply_coords(np.zeros((1, 2)))


class AddRandom(ImageAugmentor):
    """A custom augmentor written the current way."""

    def __init__(self, high=10):
        super().__init__()
        self.high = high

    def get_transform(self, img):
        v = self.rng.randint(self.high)
        return imgaug.PhotometricTransform(lambda im: im + v, name=f"add {v}")


class OldStyle(ImageAugmentor):
    """A custom augmentor written against the older interface."""

    def _get_augment_params(self, img):
        return self.rng.randint(1, 5)

    def _augment(self, img, p):
        return img * p


class NoTransform(ImageAugmentor):
    pass


class Invert(imgaug.PhotometricAugmentor):
    def _augment(self, img, _):
        return 255 - img


def test_custom_augmentors():
    img = np.array([[1.0, 2.0]])
    aug = AddRandom()
    aug.rng = np.random.RandomState(0)
    v = np.random.RandomState(0).randint(10)
    np.testing.assert_array_equal(aug.augment(img), img + v)
    assert repr(aug) == "imgaug.AddRandom()" and repr(AddRandom(3)) == "imgaug.AddRandom(high=3)"
    old = OldStyle()
    old.rng = np.random.RandomState(1)
    p = np.random.RandomState(1).randint(1, 5)
    t = old.get_transform(img)
    np.testing.assert_array_equal(t.apply_image(img), img * p)
    np.testing.assert_array_equal(t.apply_coords(np.ones((1, 2))), np.ones((1, 2)))
    with pytest.raises(NotImplementedError, match="NoTransform must implement get_transform"):
        NoTransform().augment(img)
    np.testing.assert_array_equal(Invert().augment(np.array([[0, 5]], dtype="uint8")), [[255, 250]])


def test_legacy_methods_warn_and_work():
    img = _img()
    aug = Flip(horiz=True, prob=1.0)
    with pytest.warns(DeprecationWarning, match="get_transform"):
        out, t = aug.augment_return_params(img)
    np.testing.assert_array_equal(out, img[:, ::-1])
    with pytest.warns(DeprecationWarning):
        np.testing.assert_array_equal(aug.augment_with_params(img, t), img[:, ::-1])
    with pytest.warns(DeprecationWarning):
        np.testing.assert_allclose(aug.augment_coords(np.array([[1.0, 0.0]]), t), [[11.0, 0.0]])


def test_reprs():
    assert repr(RandomCrop((3, 4))) == "imgaug.RandomCrop(crop_shape=(3, 4))"
    assert repr(Flip(horiz=True)) == "imgaug.Flip(horiz=True)"
    assert repr(AugmentorList([Flip(vert=True)])) == "imgaug.AugmentorList([\n  imgaug.Flip(vert=True)])"
    assert repr(imgaug.CropTransform(1, 2, 3, 4)) == "imgaug.CropTransform(y0=1, x0=2, h=3, w=4)"


def test_external_wrappers_need_their_library():
    for cls, lib in [(imgaug.IAAugmentor, "imgaug"), (imgaug.Albumentations, "albumentations")]:
        try:
            __import__(lib)
        except ImportError:
            with pytest.raises(ImportError, match=f"pip install {lib}"):
                cls(object())
        else:  # the library is installed: the wrapper builds
            assert cls is not None


def test_gaussian_deform_identity_with_zero_range():
    img = _img(8, 8).astype("float32")
    aug = imgaug.GaussianDeform([(0.5, 0.5)], (8, 8), randrange=0)
    np.testing.assert_allclose(aug.augment(img), img, atol=1e-4)
    moved = imgaug.GaussianDeform([(0.2, 0.3), (0.7, 0.6)], (8, 8), randrange=2).augment(img)
    assert moved.shape == img.shape and moved.dtype == np.float32
    with pytest.raises(ValueError, match="shape"):
        aug.augment(_img(9, 8))


class NoSuperInit(ImageAugmentor):
    def __init__(self, k=2):
        self.k = k  # no super().__init__()

    def get_transform(self, img):
        return imgaug.CropTransform(int(self.rng.randint(self.k)), 0, 1, 1)


def test_subclass_without_super_init_gets_an_rng_on_first_use(seeded):
    seeded(6)
    aug = NoSuperInit(5)
    assert aug.get_transform(_img()).y0 == np.random.RandomState(6).randint(5)
    with pytest.raises(AttributeError, match="NoSuperInit object has no attribute 'nothing'"):
        aug.nothing


class OldBrightness(ImageAugmentor):
    def __init__(self, delta):
        super().__init__()
        self._init(locals())

    def _get_augment_params(self, _):
        return self._rand_range(-self.delta, self.delta)

    def _augment(self, img, v):
        return img + v


class OldFlip(ImageAugmentor):
    def __init__(self):
        super().__init__()

    def _get_augment_params(self, img):
        return img.shape[1]

    def _augment(self, img, w):
        return img[:, ::-1]

    def _augment_coords(self, coords, w):
        coords[:, 0] = w - coords[:, 0]
        return coords


class OldNoParams(ImageAugmentor):
    def _augment(self, img, params):
        assert params is None
        return img * 2


def test_older_style_augmentors_in_a_list_replay_the_same_transform():
    img = np.random.RandomState(0).rand(20, 20).astype("float32")
    augs = AugmentorList([OldBrightness(0.5), OldFlip(), OldNoParams(), imgaug.Resize((30, 30)),
                          imgaug.SaltPepperNoise()])
    assert repr(augs.augmentors[0]) == "imgaug.OldBrightness(delta=0.5)"
    tfms = augs.get_transform(img)
    first = tfms.apply_image(img.copy())
    second = tfms.apply_image(img.copy())  # the same transform applied again: the same result
    np.testing.assert_array_equal(first, second)
    assert first.shape == (30, 30)
    coords = tfms.apply_coords(np.array([[0.0, 0.0], [10.0, 12.0]], dtype="float32"))
    np.testing.assert_allclose(coords, [[30.0, 0.0], [15.0, 18.0]])
