//! What a distribution carries besides the programs: the man pages, the shell completions and
//! the Debian package. The man pages are written by hand, so these tests keep them in step with
//! the programs (every long option of `--help`, the exit codes, the library's strategy and
//! device tables) and check that groff renders them without a warning; the completion scripts
//! are generated, so these tests check that they exist and offer every option.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::{run, Run};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every program of the Debian package with a clap command line: the engine's (src/bin/) and
/// the lab's (lab/src/bin/).
const PROGRAMS: &[&str] =
    &["unpack", "unpack-bench", "unpack-compare", "unpack-crashtest", "unpack-vdisk"];

/// The programs that take dpkg's command line instead (their `--help` is dpkg's, and they have
/// no completions of their own): a man page each, held to the same rendering and version.
const FRONT_ENDS: &[&str] = &["unpack-dpkg"];

/// Every program's name.
fn all_programs() -> impl Iterator<Item = &'static str> {
    PROGRAMS.iter().chain(FRONT_ENDS).copied()
}

/// The programs, with their binaries (`unpack` is the engine package's, built beside the lab's).
fn built() -> impl Iterator<Item = (&'static str, &'static str)> {
    PROGRAMS.iter().map(|name| (*name, common::program(name)))
}

fn repo() -> &'static Path {
    common::repo()
}

fn page(name: &str) -> PathBuf {
    repo().join("man").join(format!("{name}.1"))
}

fn source(name: &str) -> String {
    std::fs::read_to_string(page(name)).unwrap_or_else(|e| panic!("{}: {e}", page(name).display()))
}

/// The page as `man` shows it, in ASCII, with runs of white space made single spaces (the
/// formatter justifies lines) so that a phrase can be looked for whole.
fn rendered(name: &str) -> String {
    let r = run(Command::new("man").args(["-E", "ascii", "-l"]).arg(page(name)));
    assert_eq!(r.code, 0, "man -l {}: {}", page(name).display(), r.stderr);
    r.stdout.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The roff source lines of section `title` (`.SH TITLE` up to the next `.SH`).
fn section<'a>(source: &'a str, title: &str) -> Vec<&'a str> {
    let head = format!(".SH {title}");
    source
        .lines()
        .skip_while(|l| *l != head)
        .skip(1)
        .take_while(|l| !l.starts_with(".SH"))
        .collect()
}

/// The tag lines of the `.TP` items of a section, with roff's `\-` made a plain `-`.
fn item_tags(lines: &[&str]) -> Vec<String> {
    lines.windows(2).filter(|w| w[0] == ".TP").map(|w| w[1].replace("\\-", "-")).collect()
}

/// The long options (`--name`) a man page documents as items of its OPTIONS section.
fn documented_options(name: &str) -> BTreeSet<String> {
    let source = source(name);
    item_tags(&section(&source, "OPTIONS")).iter().flat_map(|tag| long_options(tag)).collect()
}

/// The `--name` words of a text, without the dashes.
fn long_options(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c == '"' || c == ',')
        .filter_map(|w| w.strip_prefix("--"))
        .map(|w| {
            w.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect::<String>()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// The long options clap lists in a `--help`: the lines of the `Options:` section that start
/// with a dash at an option's indentation (descriptions are indented further).
fn help_options(help: &str) -> BTreeSet<String> {
    help.lines()
        .skip_while(|l| *l != "Options:")
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with(' '))
        .filter(|l| l.len() - l.trim_start().len() <= 6 && l.trim_start().starts_with('-'))
        .flat_map(|l| {
            l.split_whitespace()
                .take_while(|w| w.starts_with('-'))
                .flat_map(long_options)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn help(bin: &str) -> String {
    let r = run(Command::new(bin).arg("--help"));
    assert_eq!(r.code, 0, "{bin} --help: {}", r.stderr);
    r.stdout
}

/// Options every program takes without showing them in `--help` (see `unpack::cli`).
const HIDDEN: &[&str] = &["completions"];

#[test]
fn every_program_has_a_man_page_and_every_man_page_a_program() {
    let sources: BTreeSet<String> = ["src/bin", "lab/src/bin"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(repo().join(dir)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let built: BTreeSet<String> = built()
        .map(|(n, _)| n.to_string())
        .chain(FRONT_ENDS.iter().map(|n| n.to_string()))
        .collect();
    assert_eq!(
        sources, built,
        "PROGRAMS and FRONT_ENDS in lab/tests/ship.rs must list every program of src/bin/ and lab/src/bin/"
    );
    let pages: BTreeSet<String> = std::fs::read_dir(repo().join("man"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "1"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let programs: BTreeSet<String> = all_programs().map(|n| n.to_string()).collect();
    assert_eq!(pages, programs, "one man page per program, and no other");
}

#[test]
fn man_pages_render_without_warnings() {
    for name in all_programs() {
        let r = run(Command::new("man").args(["--warnings", "-l"]).arg(page(name)));
        assert_eq!(
            (r.code, r.stderr.as_str()),
            (0, ""),
            "man --warnings -l {}",
            page(name).display()
        );
        for heading in
            ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "EXAMPLES", "SEE ALSO"]
        {
            assert!(r.stdout.lines().any(|l| l == heading), "{name}.1 has no {heading} section");
        }
        // As lintian renders it (Lintian::Check::Documentation::Manual): troff's own output at
        // 120 columns, paginated, in a clean environment; and at a terminal's 80.
        for width in ["80", "120"] {
            let r = run(Command::new("man")
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("LC_ALL", "C.UTF-8")
                .env("MANROFFSEQ", "")
                .env("MANWIDTH", width)
                .args(["--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z"])
                .arg(page(name)));
            assert_eq!(
                (r.code, r.stderr.as_str()),
                (0, ""),
                "{name}.1 as lintian renders it at {width} columns"
            );
        }
    }
}

#[test]
fn man_pages_document_every_long_option_of_help_and_no_other() {
    for (name, bin) in built() {
        let in_help = help_options(&help(bin));
        assert!(
            in_help.contains("help") && in_help.contains("version"),
            "{name} --help was not parsed: {in_help:?}"
        );
        let in_page = documented_options(name);
        let missing: Vec<_> = in_help.difference(&in_page).collect();
        assert!(missing.is_empty(), "{name}.1 lacks {missing:?} of `{name} --help`");
        let stale: Vec<_> = in_page
            .iter()
            .filter(|o| !in_help.contains(*o) && !HIDDEN.contains(&o.as_str()))
            .collect();
        assert!(
            stale.is_empty(),
            "{name}.1 documents {stale:?}, which `{name} --help` does not list"
        );
        for hidden in HIDDEN {
            assert!(in_page.contains(*hidden), "{name}.1 does not document --{hidden}");
        }
    }
}

#[test]
fn unpack_page_lists_the_exit_codes_of_help() {
    let Some((_, bin)) = built().find(|(n, _)| *n == "unpack") else {
        panic!("unpack is not built")
    };
    let help = help(bin);
    let in_help: BTreeSet<String> = help
        .lines()
        .skip_while(|l| *l != "Exit codes:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .flat_map(|l| {
            l.split_whitespace()
                .map_while(|w| w.trim_end_matches(',').parse::<u8>().ok())
                .collect::<Vec<_>>()
        })
        .map(|c| c.to_string())
        .collect();
    assert!(
        in_help.contains("0") && in_help.contains("5"),
        "unpack --help's exit codes were not parsed: {in_help:?}"
    );
    let source = source("unpack");
    let in_page: BTreeSet<String> = item_tags(&section(&source, "EXIT STATUS"))
        .iter()
        .flat_map(|tag| {
            tag.split(|c: char| !c.is_ascii_digit())
                .filter(|w| !w.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(in_page, in_help, "unpack.1's EXIT STATUS against `unpack --help`");
}

#[test]
fn unpack_page_states_every_strategy_with_its_guarantee() {
    let page = rendered("unpack");
    for s in unpack::durability::ALL {
        let name = match s.aliases {
            [] => s.name.to_string(),
            aliases => format!("{} (alias {})", s.name, aliases.join(", ")),
        };
        for phrase in [
            name,
            s.idea.to_string(),
            format!("Guarantee: {}.", s.guarantee),
            format!("As in: {}.", s.anchor),
        ] {
            assert!(page.contains(&phrase), "unpack.1 lacks {phrase:?} (durability::ALL)");
        }
    }
    let default = format!("Default: {}.", unpack::durability::DEFAULT);
    assert!(page.contains(&default), "unpack.1 lacks {default:?}");
}

#[test]
fn vdisk_page_states_every_named_profile() {
    use unpack_lab::vdisk::profile::{format_bandwidth, format_duration, NAMED};
    let page = rendered("unpack-vdisk");
    for (name, latency, bandwidth, what) in NAMED {
        let line = format!(
            "{name} flush {}, bandwidth {}: {what}",
            format_duration(*latency),
            format_bandwidth(*bandwidth)
        );
        assert!(page.contains(&line), "unpack-vdisk.1 lacks {line:?} (vdisk::profile::NAMED)");
    }
}

#[test]
fn the_three_main_pages_refer_to_dpkg_and_the_flush_calls() {
    for name in ["unpack", "unpack-bench", "unpack-crashtest"] {
        let page = rendered(name);
        let see_also = page.split("SEE ALSO").nth(1).unwrap_or_default();
        for reference in ["dpkg(1)", "sync(2)", "syncfs(2)", "fsync(2)"] {
            assert!(see_also.contains(reference), "{name}.1's SEE ALSO lacks {reference}");
        }
    }
}

#[test]
fn cargo_debian_changelog_and_man_pages_name_one_version() {
    let version = env!("CARGO_PKG_VERSION");
    let changelog = std::fs::read_to_string(repo().join("debian/changelog")).unwrap();
    let first = changelog.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("unpack ({version}) ")),
        "debian/changelog starts with {first:?}, not version {version}"
    );
    for name in all_programs() {
        let th = source(name)
            .lines()
            .find(|l| l.starts_with(".TH "))
            .map(String::from)
            .unwrap_or_default();
        assert!(
            th.contains(&format!("\"unpack {version}\"")),
            "{name}.1: {th:?} does not name unpack {version}"
        );
    }
}

#[test]
fn completions_for_bash_zsh_and_fish_offer_every_long_option() {
    for (name, bin) in built() {
        let options = help_options(&help(bin));
        for shell in ["bash", "zsh", "fish"] {
            let r = run(Command::new(bin).args(["--completions", shell]));
            assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{name} --completions {shell}");
            let names_program = match shell {
                "bash" => r.stdout.lines().any(|l| {
                    l.trim_start().starts_with("complete -F ") && l.ends_with(&format!(" {name}"))
                }),
                "zsh" => r.stdout.starts_with(&format!("#compdef {name}\n")),
                _ => fish_commands(&r.stdout)
                    .iter()
                    .all(|l| l.starts_with(&format!("complete -c {name} "))),
            };
            assert!(
                names_program,
                "{name} --completions {shell} does not complete {name}:\n{}",
                r.stdout
            );
            for option in &options {
                let offered =
                    if shell == "fish" { format!("-l {option} ") } else { format!("--{option}") };
                assert!(
                    r.stdout.contains(&offered),
                    "{name} --completions {shell} does not offer --{option}"
                );
            }
        }
        let bash = run(Command::new(bin).args(["--completions", "bash"]));
        let syntax = run(Command::new("bash").args(["-n", "-c", &bash.stdout]));
        assert_eq!(syntax.code, 0, "{name}'s bash completion is not valid bash: {}", syntax.stderr);
    }
}

/// The commands of a fish completion script, one string each: a quoted list of values (`-a
/// "none\t''<newline>fsync\t''..."`) goes on over several lines, which belong to the command
/// that opened the quote. An unclosed quote at the end is a command of its own, which fails the
/// check of its start.
fn fish_commands(script: &str) -> Vec<String> {
    let mut commands: Vec<String> = Vec::new();
    let mut open = false;
    for line in script.lines() {
        match commands.last_mut() {
            Some(command) if open => {
                command.push('\n');
                command.push_str(line);
            }
            _ if line.is_empty() => continue,
            _ => commands.push(line.to_string()),
        }
        // A double quote not escaped by a backslash opens or closes the list.
        let mut escaped = false;
        for c in line.chars() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => open = !open,
                _ => escaped = false,
            }
        }
    }
    if open {
        commands.push("an unclosed quote".to_string());
    }
    commands
}

/// `unpack -s <TAB>` offers the built-in strategies' names, in every shell: possible values,
/// not free text (bash used to offer file names there).
#[test]
fn completions_offer_the_strategy_names_after_dash_s() {
    let unpack = common::program("unpack");
    let names: Vec<&str> = unpack::durability::ALL.iter().map(|s| s.name).collect();
    let script = |shell| {
        let r = run(Command::new(unpack).args(["--completions", shell]));
        assert_eq!(r.code, 0, "unpack --completions {shell}: {}", r.stderr);
        r.stdout
    };
    let bash = script("bash");
    let words = format!("compgen -W \"{}\"", names.join(" "));
    for option in ["--strategy)", "-s)"] {
        let case = bash.split(option).nth(1).unwrap_or_default();
        let case = case.split(";;").next().unwrap_or_default();
        assert!(case.contains(&words), "bash: {option} does not offer {words}:\n{case}");
    }
    // Run, not only read: bash's completion function itself, for `unpack -s sy<TAB>`.
    let offered = run(Command::new("bash").arg("-c").arg(format!(
        "{bash}\nCOMP_WORDS=(unpack -s sy); COMP_CWORD=2; COMP_LINE='unpack -s sy'; \
         COMP_POINT=${{#COMP_LINE}}; _unpack unpack sy -s; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )));
    assert_eq!((offered.code, offered.stdout.as_str()), (0, "syncfs\n"), "{}", offered.stderr);
    let zsh = script("zsh");
    let values = format!(":NAME:({})'", names.join(" "));
    for option in ["'-s+[", "'--strategy=["] {
        let line = zsh.lines().find(|l| l.starts_with(option)).unwrap_or_default();
        assert!(line.ends_with(&format!("{values} \\")), "zsh: {option} offers no names: {line}");
    }
    let fish = fish_commands(&script("fish"));
    let strategy = fish.iter().find(|c| c.contains(" -l strategy ")).expect("fish: -l strategy");
    let offered: Vec<&str> = strategy
        .split_once(" -a \"")
        .map(|(_, list)| {
            list.trim_end_matches('"').lines().map(|l| l.split("\\t").next().unwrap_or(l))
        })
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(offered, names, "fish: -l strategy offers other values:\n{strategy}");
}

#[test]
fn completions_take_no_other_argument() {
    for (name, bin) in built() {
        let r = run(Command::new(bin).args(["--completions", "bash", "some.deb"]));
        assert_eq!(r.code, 2, "{name} --completions bash some.deb: {r:?}");
        assert!(r.stderr.contains("cannot be used with"), "{name}: {}", r.stderr);
        let r = run(Command::new(bin).args(["--completions", "tcsh"]));
        assert_eq!(r.code, 2, "{name} --completions tcsh: {r:?}");
        assert!(r.stderr.contains("bash, elvish, fish, powershell, zsh"), "{name}: {}", r.stderr);
    }
}

/// The project eats its own food: the packaged `unpack` unpacks each of its own two packages
/// (the installer, UNPACK_DEB, and the lab, UNPACK_LAB_DEB) into a fresh root, and each tree
/// must be the one `dpkg-deb -x` makes (contents, modes, owners, times, links). Each package
/// holds its programs, by where their mains are (src/bin/: the installer; lab/src/bin/: the
/// lab), with their man pages and completions (but the front ends'). Needs the packages: `scripts/self-unpack.sh`
/// builds them and runs this test.
#[test]
#[ignore = "needs UNPACK_DEB and UNPACK_LAB_DEB, the built packages: run scripts/self-unpack.sh"]
fn packaged_unpack_unpacks_its_own_packages_as_dpkg_deb_does() {
    let deb = |var: &str| {
        PathBuf::from(std::env::var_os(var).unwrap_or_else(|| panic!("{var} names a package")))
    };
    let (installer, lab) = (deb("UNPACK_DEB"), deb("UNPACK_LAB_DEB"));
    let dir = tempfile::tempdir().unwrap();
    let unpack = dir.path().join("installer/usr/bin/unpack");
    for (deb, folder, name) in [(&installer, "src/bin", "installer"), (&lab, "lab/src/bin", "lab")]
    {
        let reference = common::reference_tree(deb, &dir.path().join(name));
        let packaged: BTreeSet<&Path> = reference.keys().map(PathBuf::as_path).collect();
        let programs: Vec<String> = std::fs::read_dir(repo().join(folder))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .collect();
        assert!(!programs.is_empty(), "no program in {folder}");
        for program in &programs {
            let mut paths =
                vec![format!("usr/bin/{program}"), format!("usr/share/man/man1/{program}.1.gz")];
            // A front end takes dpkg's command line: no completions of its own.
            if !FRONT_ENDS.contains(&program.as_str()) {
                paths.extend([
                    format!("usr/share/bash-completion/completions/{program}"),
                    format!("usr/share/zsh/vendor-completions/_{program}"),
                    format!("usr/share/fish/vendor_completions.d/{program}.fish"),
                ]);
            }
            for path in paths {
                assert!(packaged.contains(Path::new(&path)), "{} lacks {path}", deb.display());
            }
        }
        let root = dir.path().join(format!("{name}-root"));
        std::fs::create_dir(&root).unwrap();
        let r: Run = run(Command::new(&unpack).arg("-q").arg(deb).arg(&root));
        assert_eq!(r.code, 0, "{} {}: {}", unpack.display(), deb.display(), r.stderr);
        common::assert_same_tree(
            &common::snapshot(&root),
            &reference,
            &format!("the packaged unpack against dpkg-deb -x of {}", deb.display()),
        );
    }
}

/// The backticked spans of `text` (`` `src/read/` ``), each once, in order.
fn code_spans(text: &str) -> Vec<&str> {
    let mut spans: Vec<&str> = text.split('`').skip(1).step_by(2).collect();
    let mut seen = BTreeSet::new();
    spans.retain(|s| seen.insert(*s));
    spans
}

#[test]
fn every_path_the_architecture_page_names_exists() {
    let text = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let tops = ["src/", "lab/", "tests/", "man/", "fixtures/", "fuzz/", "docs/", "debian/"];
    let mut checked = 0;
    let mut missing = Vec::new();
    let mut check = |path: PathBuf| {
        checked += 1;
        if !path.exists() {
            missing.push(path.strip_prefix(repo()).unwrap_or(&path).display().to_string());
        }
    };
    for span in code_spans(&text) {
        if tops.iter().any(|t| span.starts_with(t)) || span == "Cargo.toml" {
            check(repo().join(span));
        }
    }
    // The table's rows name a folder, then its files by their names alone.
    for row in text.lines().filter(|l| l.starts_with("| `")) {
        let mut spans = code_spans(row).into_iter();
        let Some(home) = spans.next().filter(|h| h.ends_with('/')) else { continue };
        for file in spans.filter(|s| s.ends_with(".rs") && !s.contains('/')) {
            check(repo().join(home).join(file));
        }
    }
    assert!(checked > 60, "too few paths found in docs/architecture.md: {checked}");
    assert_eq!(missing, Vec::<String>::new(), "docs/architecture.md names paths that do not exist");
}

/// The engine's integration tests (tests/*.rs) are targets of the lab's package, which lists
/// them one by one (see lab/Cargo.toml): a file of tests/ that is not listed would never run.
#[test]
fn every_test_file_of_the_engine_is_a_test_target_of_the_lab() {
    let manifest = std::fs::read_to_string(repo().join("lab/Cargo.toml")).unwrap();
    let listed: BTreeSet<String> = manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("path = \"../tests/"))
        .filter_map(|l| l.strip_suffix('"'))
        .map(String::from)
        .collect();
    let files: BTreeSet<String> = std::fs::read_dir(repo().join("tests"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rs"))
        .collect();
    assert!(files.contains("unpack.rs"), "tests/ was not read: {files:?}");
    assert_eq!(listed, files, "lab/Cargo.toml's [[test]] targets against the files of tests/");
}
