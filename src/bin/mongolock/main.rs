//! `mongolock`: run commands under MongoDB-backed distributed locks and leader elections.
//! See `mongolock --help`; the implementation and the exit codes are in `cli/`.

#[cfg(unix)]
mod cli;

use std::process::ExitCode;

#[cfg(unix)]
fn main() -> ExitCode {
    use clap::Parser;
    use cli::{Cli, exit_code};

    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(mut error) => {
            cli::hints::add(&mut error, std::env::args_os());
            // --help and --version are "errors" printed to stdout with success.
            let code = if error.use_stderr() {
                exit_code::USAGE
            } else {
                0
            };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    // Panics are reported as one line below, never with a backtrace; the library catches
    // and reports the ones inside its actors itself.
    std::panic::set_hook(Box::new(|_| {}));
    match std::panic::catch_unwind(|| cli::execute(cli)) {
        Ok(Ok(code)) => ExitCode::from(code),
        Ok(Err(error)) => {
            eprintln!("mongolock: {}", error.one_line());
            ExitCode::from(error.exit_code())
        }
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            let error = cli::CliError::Internal(message);
            eprintln!("mongolock: {}", error.one_line());
            ExitCode::from(error.exit_code())
        }
    }
}

#[cfg(not(unix))]
fn main() -> ExitCode {
    eprintln!("mongolock: the command-line tool supports Unix only");
    ExitCode::from(70)
}
