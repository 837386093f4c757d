"""Readers of well-known datasets in their published on-disk formats (``trainbus.dataflow.dataset``).

Each reader looks in ``get_dataset_path(...)`` (``$TRAINBUS_DATASET`` or ``$TENSORPACK_DATASET``,
default ``~/tensorpack_data``) unless given a directory, downloads a missing file when the network
is reachable, and otherwise raises :class:`DatasetFileNotFoundError` naming the URL and where to
put the file. A damaged file raises :class:`DatasetFileCorruptError`.
"""

from __future__ import annotations

from trainbus_dataflow.dataset._files import DatasetFileCorruptError, DatasetFileNotFoundError
from trainbus_dataflow.dataset.bsds500 import BSDS500
from trainbus_dataflow.dataset.caltech101 import Caltech101Silhouettes
from trainbus_dataflow.dataset.cifar import Cifar10, Cifar100, CifarBase
from trainbus_dataflow.dataset.ilsvrc import ILSVRC12, ILSVRC12Files, ILSVRCMeta, TinyImageNet
from trainbus_dataflow.dataset.mnist import FashionMnist, Mnist
from trainbus_dataflow.dataset.places import Places365Standard
from trainbus_dataflow.dataset.svhn import SVHNDigit

__all__ = ["Mnist", "FashionMnist", "CifarBase", "Cifar10", "Cifar100", "SVHNDigit", "ILSVRCMeta", "ILSVRC12",
           "ILSVRC12Files", "TinyImageNet", "BSDS500", "Caltech101Silhouettes", "Places365Standard",
           "DatasetFileNotFoundError", "DatasetFileCorruptError"]
