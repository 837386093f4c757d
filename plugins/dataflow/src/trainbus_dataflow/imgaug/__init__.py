"""Image augmentation on NumPy and OpenCV: augmentors that draw random parameters, and the deterministic
transforms they return (``trainbus.dataflow.imgaug``). See ``docs/imgaug.md``."""

from __future__ import annotations

from .base import Augmentor, AugmentorList, ImageAugmentor, PhotometricAugmentor
from .convert import ColorSpace, Grayscale, ToFloat32, ToUint8
from .crop import CenterCrop, GoogleNetRandomCropAndResize, RandomCrop, RandomCropRandomShape, RandomCutout
from .deform import GaussianDeform
from .external import Albumentations, IAAugmentor
from .geometry import Affine, Rotation, RotationAndCropValid, Shift
from .imgproc import (Brightness, BrightnessScale, Clip, Contrast, Gamma, GaussianBlur, Hue, Lighting,
                      MeanVarianceNormalize, MinMaxNormalize, Saturation)
from .meta import Identity, MapImage, RandomApplyAug, RandomChooseAug, RandomOrderAug
from .misc import Flip, RandomResize, Resize, ResizeShortestEdge, Transpose
from .noise import GaussianNoise, JpegNoise, SaltPepperNoise
from .paste import BackgroundFiller, CenterPaste, ConstantBackgroundFiller, RandomPaste
from .transform import (CropTransform, FlipTransform, LazyTransform, NoOpTransform, PhotometricTransform,
                        ResizeTransform, Transform, TransformFactory, TransformList, TransposeTransform,
                        WarpAffineTransform)

__all__ = [
    # base
    "Augmentor", "ImageAugmentor", "AugmentorList", "PhotometricAugmentor",
    # transforms
    "Transform", "ResizeTransform", "CropTransform", "FlipTransform", "TransformList", "TransformFactory",
    "WarpAffineTransform", "TransposeTransform", "PhotometricTransform", "NoOpTransform", "LazyTransform",
    # crop
    "RandomCrop", "CenterCrop", "RandomCropRandomShape", "GoogleNetRandomCropAndResize", "RandomCutout",
    # deform
    "GaussianDeform",
    # geometry
    "Shift", "Rotation", "RotationAndCropValid", "Affine",
    # imgproc
    "Hue", "Brightness", "BrightnessScale", "Contrast", "MeanVarianceNormalize", "GaussianBlur", "Gamma", "Clip",
    "Saturation", "Lighting", "MinMaxNormalize",
    # meta
    "RandomChooseAug", "MapImage", "Identity", "RandomApplyAug", "RandomOrderAug",
    # misc
    "Flip", "Resize", "RandomResize", "ResizeShortestEdge", "Transpose",
    # noise
    "JpegNoise", "GaussianNoise", "SaltPepperNoise",
    # paste
    "CenterPaste", "BackgroundFiller", "ConstantBackgroundFiller", "RandomPaste",
    # convert
    "ColorSpace", "Grayscale", "ToUint8", "ToFloat32",
    # external
    "IAAugmentor", "Albumentations",
]
