"""AtomicPusher: TFX's Pusher, with a pushed version that appears whole or not at all."""

from tfx_distillery.components.pusher.component import AtomicPusher

__all__ = ['AtomicPusher']
