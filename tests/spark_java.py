"""Whether a Java runtime can start Spark here: the tests that need Spark skip
with the reason where none can."""
import shutil
import subprocess


def no_java():
    """Why no Java can run Spark here (None where ``java -version`` works)."""
    java = shutil.which("java")
    if java is None:
        return "no java on PATH (Spark needs a JRE 17 or 21)"
    done = subprocess.run([java, "-version"], capture_output=True, text=True)
    return None if done.returncode == 0 else f"java -version failed: {done.stderr[:200]}"
