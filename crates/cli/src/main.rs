fn main() {
    std::process::exit(agent_runner::cli::main());
}
