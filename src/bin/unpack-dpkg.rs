//! `unpack-dpkg [DPKG OPTIONS] ACTION ...`: the program is [`unpack::frontend`].

fn main() -> std::process::ExitCode {
    unpack::frontend::main()
}
