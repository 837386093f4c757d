"""Every augmentor, transform and image dataflow takes tensorpack's argument names and defaults."""

from __future__ import annotations

import inspect

import pytest

import trainbus.dataflow as df
from trainbus.dataflow import imgaug

# Constructor arguments (after self) of tensorpack.dataflow.imgaug and tensorpack.dataflow.image;
# cv2 constants appear as their values (INTER_LINEAR = 1, BORDER_REPLICATE = 1, BORDER_CONSTANT = 0).
TENSORPACK_SIGNATURES = {
    "Affine": "scale=None, translate_frac=None, rotate_max_deg=0.0, shear=0.0, interp=1, border=1, border_value=0",
    "Albumentations": "augmentor",
    "AugmentImageComponent": "ds, augmentors, index=0, copy=True, catch_exceptions=False",
    "AugmentImageComponents": "ds, augmentors, index=(0, 1), coords_index=(), copy=True, catch_exceptions=False",
    "AugmentImageCoordinates": "ds, augmentors, img_index=0, coords_index=1, copy=True, catch_exceptions=False",
    "Augmentor": "",
    "AugmentorList": "augmentors",
    "BackgroundFiller": "args, kwargs",
    "Brightness": "delta, clip=True",
    "BrightnessScale": "range, clip=True",
    "CenterCrop": "crop_shape",
    "CenterPaste": "background_shape, background_filler=None",
    "Clip": "min=0, max=255",
    "ColorSpace": "mode, keepdims=True",
    "ConstantBackgroundFiller": "value",
    "Contrast": "factor_range, rgb=None, clip=True",
    "CropTransform": "y0, x0, h, w",
    "Flip": "horiz=False, vert=False, prob=0.5",
    "FlipTransform": "h, w, horiz=True",
    "Gamma": "range=(-0.5, 0.5)",
    "GaussianBlur": "size_range=(0, 3), sigma_range=(0, 0), symmetric=True, max_size=None",
    "GaussianNoise": "sigma=1, clip=True",
    "GoogleNetRandomCropAndResize": ("crop_area_fraction=(0.08, 1.0), aspect_ratio_range=(0.75, 1.333), "
                                     "target_shape=224, interp=1"),
    "Grayscale": "keepdims=True, rgb=False, keepshape=False",
    "Hue": "range=(0, 180), rgb=True",
    "IAAugmentor": "augmentor",
    "Identity": "",
    "ImageAugmentor": "",
    "ImageFromFile": "files, channel=3, resize=None, shuffle=False",
    "JpegNoise": "quality_range=(40, 100)",
    "Lighting": "std, eigval, eigvec, clip=True",
    "MapImage": "func, coord_func=None",
    "MeanVarianceNormalize": "all_channel=True",
    "MinMaxNormalize": "min=0, max=255, all_channel=True",
    "NoOpTransform": "",
    "PhotometricAugmentor": "",
    "PhotometricTransform": "func, name=None",
    "RandomApplyAug": "aug, prob",
    "RandomChooseAug": "aug_lists",
    "RandomCrop": "crop_shape",
    "RandomCropRandomShape": "wmin, hmin, wmax=None, hmax=None, max_aspect_ratio=None",
    "RandomCutout": "h_range, w_range, fill=0.0",
    "RandomOrderAug": "aug_lists",
    "RandomPaste": "background_shape, background_filler=None",
    "RandomResize": "xrange, yrange=None, minimum=(0, 0), aspect_ratio_thres=0.15, interp=1",
    "Resize": "shape, interp=1",
    "ResizeShortestEdge": "size, interp=1",
    "ResizeTransform": "h, w, new_h, new_w, interp",
    "Rotation": "max_deg, center_range=(0, 1), interp=1, border=1, step_deg=None, border_value=0",
    "RotationAndCropValid": "max_deg, interp=1, step_deg=None",
    "SaltPepperNoise": "white_prob=0.05, black_prob=0.05",
    "Saturation": "alpha=0.4, rgb=True, clip=True",
    "Shift": "horiz_frac=0, vert_frac=0, border=1, border_value=0",
    "ToFloat32": "",
    "ToUint8": "",
    "Transform": "",
    "TransformFactory": "name=None, kwargs",
    "TransformList": "tfms",
    "Transpose": "prob=0.5",
    "TransposeTransform": "",
    "WarpAffineTransform": "mat, dsize, interp=1, borderMode=0, borderValue=0",
}


def _signature(cls) -> str:
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    return ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in params)


@pytest.mark.parametrize("name", sorted(TENSORPACK_SIGNATURES))
def test_constructor_arguments_match_tensorpack(name):
    cls = getattr(imgaug, name, None) or getattr(df, name)
    assert _signature(cls) == TENSORPACK_SIGNATURES[name]


def test_keyword_construction_with_tensorpack_names(opencv_importable):
    import cv2

    built = [
        imgaug.Flip(horiz=True, vert=False, prob=0.3),
        imgaug.RandomCrop(crop_shape=(4, 5)),
        imgaug.Resize(shape=8, interp=cv2.INTER_NEAREST),
        imgaug.RandomResize(xrange=(0.9, 1.1), yrange=(0.9, 1.1), minimum=(2, 2), aspect_ratio_thres=0.2),
        imgaug.Rotation(max_deg=10, center_range=(0.4, 0.6), border=cv2.BORDER_CONSTANT, border_value=3),
        imgaug.Affine(scale=(0.9, 1.1), translate_frac=(0.1, 0.1), rotate_max_deg=5, shear=2),
        imgaug.GaussianBlur(size_range=(1, 2), sigma_range=(0.1, 0.2), symmetric=False),
        imgaug.RandomCutout(h_range=(1, 3), w_range=2, fill=5.0),
        imgaug.Grayscale(keepdims=True, rgb=True, keepshape=True),
    ]
    assert repr(built[0]) == "imgaug.Flip(horiz=True, prob=0.3)"
    assert built[2].shape == (8, 8) and built[2].interp == cv2.INTER_NEAREST
    assert built[4].border_value == 3 and built[5].shear == 2
