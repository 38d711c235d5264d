"""Entry point of ``python -m trainer``."""

from trainer.cli import exit_process, main

if __name__ == "__main__":
    exit_process(main)
