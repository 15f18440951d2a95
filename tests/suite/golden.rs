//! Golden snapshot of what `mcp-gateway check-config --json --config config/example.toml`
//! prints: the configuration a deployment of the example runs with, every default spelled out.
//! It is compared byte for byte with `tests/golden/check-config-example.json`, so a changed
//! default, a renamed key or a new setting shows in review as a diff of that file. After an
//! intended change, regenerate it with `UPDATE_GOLDEN=1 cargo test --test suite golden` and
//! commit the file with the change.

use crate::common::{check_config, repo_root};

/// The variable that rewrites the snapshot instead of comparing with it.
const UPDATE: &str = "UPDATE_GOLDEN";

#[test]
fn check_config_of_the_example_matches_its_golden_snapshot() {
    let example = repo_root().join("config/example.toml");
    let golden = repo_root().join("tests/golden/check-config-example.json");
    let example = example.to_str().expect("the repository's path is UTF-8");
    let output = check_config(&["--json", "--config", example], &[]);
    assert!(output.status.success(), "check-config failed: {}", String::from_utf8_lossy(&output.stderr));
    if std::env::var_os(UPDATE).is_some() {
        std::fs::write(&golden, &output.stdout).unwrap();
        return;
    }
    let expected = std::fs::read(&golden).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({e}); write it with: {UPDATE}=1 cargo test --test suite golden",
            golden.display()
        )
    });
    if output.stdout != expected {
        let (printed, expected) =
            (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&expected));
        let (printed, expected): (Vec<&str>, Vec<&str>) =
            (printed.lines().collect(), expected.lines().collect());
        let differences: Vec<String> = (0..printed.len().max(expected.len()))
            .filter(|&i| printed.get(i) != expected.get(i))
            .take(20)
            .map(|i| {
                let line = |l: Option<&&str>| l.map_or("(none)".to_string(), |l| l.to_string());
                format!(
                    "line {}:\n  golden: {}\n  now:    {}",
                    i + 1,
                    line(expected.get(i)),
                    line(printed.get(i))
                )
            })
            .collect();
        panic!(
            "check-config --json of config/example.toml differs from {} (a default or key changed?):\n{}\n\
             If the change is intended, regenerate the snapshot and commit it: {UPDATE}=1 cargo test --test suite golden",
            golden.display(),
            differences.join("\n")
        );
    }
}

/// `check-config` without `--json` prints TOML an operator can copy back into a file: loaded
/// again, it is the same configuration (the example's secrets are redacted on both sides).
#[test]
fn check_config_prints_toml_that_loads_back_as_the_same_configuration() {
    let example = repo_root().join("config/example.toml");
    let example = example.to_str().expect("the repository's path is UTF-8");
    let printed = check_config(&["--config", example], &[]);
    assert!(printed.status.success(), "check-config failed: {}", String::from_utf8_lossy(&printed.stderr));
    let text = String::from_utf8(printed.stdout).unwrap();
    assert!(!text.contains("ServerDefaults {"), "Rust debug notation, not TOML:\n{text}");
    let copy = crate::common::TempFile::new("check-config-copy.toml");
    std::fs::write(copy.path(), &text).unwrap();
    let copy_path = copy.path().to_str().unwrap();
    let again = check_config(&["--json", "--config", copy_path], &[]);
    assert!(
        again.status.success(),
        "the printed TOML does not load:\n{}\n{text}",
        String::from_utf8_lossy(&again.stderr)
    );
    let original = check_config(&["--json", "--config", example], &[]);
    let (again, original): (serde_json::Value, serde_json::Value) =
        (serde_json::from_slice(&again.stdout).unwrap(), serde_json::from_slice(&original.stdout).unwrap());
    assert_eq!(again, original, "the printed TOML is another configuration:\n{text}");
}
