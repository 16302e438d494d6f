//! The checks every benchmark test makes of a run, shared by the test files
//! of this crate (`mod support;`): a benchmark's JSON report, and its stress
//! table. They live here, not in `testkit`, so that test support does not
//! depend on the measurement crate.

use bench::report::Report;
use testkit::LessonUnderTest;

/// A benchmark binary under test: [`LessonUnderTest`] with the checks of
/// what a benchmark writes.
// Each test file compiles this module on its own and uses some of the checks.
#[allow(dead_code)]
pub trait BenchmarkChecks {
    /// Runs a benchmark with `args` and `--json`, and checks what it wrote:
    /// exit 0, `series` series of `rows` rows each, every time positive and
    /// not a single wrong element. Returns the report.
    fn assert_benchmark_clean(
        &self,
        ranks: usize,
        args: &[&str],
        series: usize,
        rows: usize,
    ) -> Report;

    /// Runs a benchmark's stress mode (`--stress N` among `args`) and checks
    /// its table: exit 0, `rows` rows of `ops` operations each, and not a
    /// single wrong element. Returns the table.
    fn assert_stress_clean(&self, ranks: usize, args: &[&str], ops: usize, rows: usize) -> String;

    /// Checks a stress run's table (see [`assert_stress_clean`](Self::assert_stress_clean)):
    /// `rows` rows of `ops` operations each, and not a single wrong element.
    fn assert_stress_table(&self, stdout: &str, stderr: &str, ops: usize, rows: usize);
}

impl BenchmarkChecks for LessonUnderTest {
    fn assert_benchmark_clean(
        &self,
        ranks: usize,
        args: &[&str],
        series: usize,
        rows: usize,
    ) -> Report {
        // A private directory (tempfile creates it 0700 with a random name).
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary directory: {e}"));
        let json = dir.path().join(format!("{}.json", self.name));
        let json_arg = json.display().to_string();
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--json", &json_arg]);
        let (stdout, stderr) = self.run_to_success(ranks, &all);
        let report =
            Report::read_json(&json).unwrap_or_else(|e| panic!("{}: {e:#}\n{stdout}", self.name));
        assert_eq!(report.machine.ranks, ranks);
        assert_eq!(report.series.len(), series, "{stdout}");
        for s in &report.series {
            assert_eq!(s.rows.len(), rows, "{}: {stdout}", s.name);
            for row in &s.rows {
                let samples = std::iter::once(&row.out_of_place).chain(&row.in_place);
                for sample in samples {
                    assert!(sample.time_us > 0.0, "{}: {row:?}", s.name);
                    assert_eq!(sample.wrong, 0, "{}: {row:?}\n{stderr}", s.name);
                }
            }
        }
        report
    }

    fn assert_stress_clean(&self, ranks: usize, args: &[&str], ops: usize, rows: usize) -> String {
        let (stdout, stderr) = self.run_to_success(ranks, args);
        self.assert_stress_table(&stdout, &stderr, ops, rows);
        stdout
    }

    fn assert_stress_table(&self, stdout: &str, stderr: &str, ops: usize, rows: usize) {
        let table: Vec<&str> = stdout
            .lines()
            .skip_while(|line| !line.starts_with("#   series"))
            .skip(1)
            .take_while(|line| !line.starts_with("# wrong elements"))
            .collect();
        assert_eq!(
            table.len(),
            rows,
            "{}: rows of the stress table:\n{stdout}",
            self.name
        );
        for row in &table {
            // The last three columns: operations, and wrong elements out of
            // place and in place (a series' name may hold a space: "-R 2").
            let fields: Vec<&str> = row.split_whitespace().collect();
            assert_eq!(
                fields.get(fields.len().saturating_sub(3)..),
                Some(&[ops.to_string().as_str(), "0", "0"][..]),
                "{}: {row}\n{stderr}",
                self.name
            );
        }
        assert!(
            stdout.contains("# wrong elements in all: 0\n"),
            "{}: {stdout}\n{stderr}",
            self.name
        );
    }
}
