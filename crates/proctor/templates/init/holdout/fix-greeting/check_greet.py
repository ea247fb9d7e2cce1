"""Holdout check: the agent never sees this file. Exits 0 when greet.py is fixed."""
import subprocess
import sys

out = subprocess.run([sys.executable, "greet.py"], capture_output=True, text=True)
if out.stdout != "Hello, world!\n":
    print(f"greet.py printed {out.stdout!r}, expected 'Hello, world!'")
    sys.exit(1)
print("greet.py prints the right greeting")
