//! `unpack [OPTIONS] PACKAGE... ROOT`: the program is [`unpack::cli::unpack`].

fn main() -> std::process::ExitCode {
    unpack::cli::unpack::main()
}
