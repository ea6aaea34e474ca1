//! Tips added to command-line errors for the mistakes people make most.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// Flags of `run` and `elect` that take a value, so the word after them is not the command.
const VALUE_FLAGS: [&str; 10] = [
    "--lock",
    "--permits",
    "--name",
    "--uri",
    "--database",
    "--collection",
    "--wait",
    "--lease",
    "--expiry",
    "--grace",
];

/// Adds a tip to `error` (from parsing `args`) when it has a likely cause: a command given
/// to `run` or `elect` without the `--` before it.
pub(crate) fn add(error: &mut clap::Error, args: impl IntoIterator<Item = OsString>) {
    if error.kind() != ErrorKind::UnknownArgument {
        return;
    }
    let Some(ContextValue::String(unexpected)) = error.get(ContextKind::InvalidArg) else {
        return;
    };
    let args: Vec<String> = args
        .into_iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    if let Some(fixed) = with_double_dash(&args, unexpected) {
        let tip = format!("the command to run goes after '--': {fixed}");
        error.insert(
            ContextKind::Suggested,
            ContextValue::StyledStrs(vec![tip.into()]),
        );
    }
}

/// `args` with `--` inserted before `unexpected`, the first word that is neither a flag nor a
/// flag's value after `run` or `elect`; `None` if that is not the mistake.
fn with_double_dash(args: &[String], unexpected: &str) -> Option<String> {
    if unexpected.starts_with('-') || args.iter().any(|arg| arg == "--") {
        return None;
    }
    let subcommand = args.iter().position(|arg| arg == "run" || arg == "elect")?;
    let at = (subcommand + 1..args.len())
        .find(|&at| args[at] == unexpected && !VALUE_FLAGS.contains(&args[at - 1].as_str()))?;
    let shown: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(index, arg)| {
            // Never echo a password from the URI.
            if index > 0 && args[index - 1] == "--uri" {
                super::connect::redact(arg)
            } else if let Some(uri) = arg.strip_prefix("--uri=") {
                format!("--uri={}", super::connect::redact(uri))
            } else {
                arg.clone()
            }
        })
        .map(|arg| shell_quoted(&arg))
        .collect();
    // Shown as `mongolock` whatever path it was started by.
    Some(format!(
        "mongolock {} -- {}",
        shown[1..at].join(" "),
        shown[at..].join(" ")
    ))
}

/// `word` as a shell would need it typed.
fn shell_quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn a_forgotten_double_dash_is_pointed_out() {
        assert_eq!(
            with_double_dash(&args("mongolock run --lock x sleep 5"), "sleep").as_deref(),
            Some("mongolock run --lock x -- sleep 5")
        );
        assert_eq!(
            with_double_dash(&args("mongolock run --lock sleep sleep 5"), "sleep").as_deref(),
            Some("mongolock run --lock sleep -- sleep 5")
        );
        assert_eq!(
            with_double_dash(
                &args("/usr/bin/mongolock -q elect --uri mongodb://u:pw@h --name x ./job it's"),
                "./job"
            )
            .as_deref(),
            Some("mongolock -q elect --uri 'mongodb://u:****@h' --name x -- ./job 'it'\\''s'")
        );
        assert_eq!(
            with_double_dash(&args("mongolock status oops"), "oops"),
            None
        );
        assert_eq!(
            with_double_dash(&args("mongolock run --bad"), "--bad"),
            None
        );
    }

    #[test]
    fn the_tip_is_added_to_the_error() {
        use clap::Parser;
        let line = args("mongolock run --lock x sleep 5");
        let mut error = super::super::Cli::try_parse_from(&line).unwrap_err();
        add(&mut error, line.into_iter().map(OsString::from));
        let text = error.to_string();
        assert!(
            text.contains(
                "tip: the command to run goes after '--': mongolock run --lock x -- sleep 5"
            ),
            "{text}"
        );
    }
}
