"""What a mount is asked to be: its SOURCE and its options (MountConfig)."""
