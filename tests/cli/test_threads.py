"""Deterministic output: --threads 1 and --threads 8 print byte-identical stdout on every
damaged fixture, in text and JSON, keyless and with --verify-data, once the fields that may
differ are taken out: the elapsed time and rate (text summary and -v details lines; JSON
`elapsed_s`, `throughput_bytes_per_s`, `started_at`, `finished_at`, and the coverage's
`full_verification_at`, `oldest_unit_verified_at`, `oldest_unit_age_s`, which are this run's
clock when there is no state file) and the thread count itself (checked to be the one asked
for)."""

import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_support as cs  # noqa: E402
from cli_support import CliTestCase  # noqa: E402

# The -v details line's rate and thread count, then the summary line's elapsed time.
_TEXT_DETAILS = re.compile(rb" read at (?:-|\d+(?:\.\d)? (?:B|KiB|MiB|GiB|TiB|PiB)/s), (\d+) threads, ")
_JSON_VARYING = re.compile(rb'"(elapsed_s|finished_at|full_verification_at|oldest_unit_age_s|'
                           rb'oldest_unit_verified_at|started_at|throughput_bytes_per_s|threads)":'
                           rb'("[0-9T:.Z-]+"|[0-9.e+-]+),')


def normalise_text(test, out, threads):
    m = _TEXT_DETAILS.search(out)
    test.assertIsNotNone(m, out)
    test.assertEqual(int(m.group(1)), threads, out)
    out = out[:m.start()] + b" read at <RATE>, <N> threads, " + out[m.end():]
    masked = cs.mask_times(out.decode()).encode()
    test.assertTrue(masked.endswith(b", <T>\n"), out)
    return masked


def normalise_json(test, out, threads):
    lines = out.split(b"\n")
    test.assertEqual(lines[-1], b"", out)
    summary = lines[-2]
    test.assertTrue(summary.startswith(b"{") and b'"type":"summary"' in summary, out)
    seen = {}

    def cut(m):
        seen[m.group(1)] = m.group(2)
        return b""
    lines[-2] = _JSON_VARYING.sub(cut, summary)
    test.assertEqual(sorted(seen), [b"elapsed_s", b"finished_at", b"full_verification_at", b"oldest_unit_age_s",
                                    b"oldest_unit_verified_at", b"started_at", b"threads",
                                    b"throughput_bytes_per_s"], summary)
    test.assertEqual(int(seen[b"threads"]), threads, summary)
    return b"\n".join(lines)


class ThreadCountDoesNotChangeTheReport(CliTestCase):
    def test_threads_1_and_8_print_the_same_report(self):
        env = {"BORG_PASSPHRASE": cs.PASSPHRASE, "BORG_KEYS_DIR": self.copy_keys()}
        cases = cs.corrupt_cases()
        self.assertEqual(len(cases), 14)
        for case in cases:
            repo = self.copy_fixture("corrupt/" + case)
            for extra in (["-v"], ["-v", "--verify-data"], ["--json"], ["--json", "--verify-data"]):
                with self.subTest(case=case, args=extra):
                    outs = []
                    for threads in (1, 8):
                        r = self.run_borgcheck(extra + ["--threads", str(threads), repo], env)
                        self.assertIn(r.rc, (0, 1, 90), r)
                        self.assertEqual(r.stderr, "", r)
                        norm = normalise_json if "--json" in extra else normalise_text
                        outs.append((r.rc, norm(self, r.stdout_bytes, threads)))
                    self.assertEqual(outs[0], outs[1])


if __name__ == "__main__":
    cs.main()
