# bash completion for gpuslice (installed to share/bash-completion/completions).
# The flags are those of each subcommand's --help; tests/integration/
# test_cli_packaging.py checks that they agree.
_gpuslice()
{
    local cur prev words cword
    _init_completion || return
    local commands="run top rm sim inspect version"
    if [ "$cword" -eq 1 ]; then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return
    fi
    local flags
    case ${words[1]} in
    run)
        case $prev in
        --mode) COMPREPLY=($(compgen -W "cap share" -- "$cur")); return ;;
        --managed) COMPREPLY=($(compgen -W "count ignore" -- "$cur")); return ;;
        --state-dir) _filedir -d; return ;;
        --lib) _filedir so; return ;;
        --memory | -m | --cores | -c | --weight | --device | -d | --name | -n | --simulated-gpu) return ;;
        esac
        local i
        for ((i = 2; i < cword; i++)); do
            if [ "${words[i]}" = "--" ]; then
                _command_offset $((i + 1))
                return
            fi
        done
        flags="--memory --cores --mode --weight --device --name --managed --state-dir --lib --simulated-gpu --help"
        ;;
    top)
        case $prev in
        --state-dir) _filedir -d; return ;;
        --watch | -w | --simulated-gpu) return ;;
        esac
        flags="--state-dir --json --watch --simulated-gpu --help"
        ;;
    rm)
        case $prev in
        --state-dir) _filedir -d; return ;;
        esac
        flags="--state-dir --help"
        ;;
    sim)
        case $prev in
        --trace-dir) _filedir -d; return ;;
        --nodes | --csv | --summary | --plot | --plot-script | --python) _filedir; return ;;
        --policy) COMPREPLY=($(compgen -W "binpack spread bestfit fgd fraglook all" -- "$cur")); return ;;
        esac
        flags="--trace-dir --nodes --pods --policy --seeds --load --csv --summary --plot --label --plot-script --python --quiet --help"
        ;;
    inspect)
        case $prev in
        --cacert) _filedir; return ;;
        --url | --node | --timeout) return ;;
        esac
        flags="--url --node --json --pods --cacert --insecure --timeout --help"
        ;;
    *) return ;;
    esac
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
}
complete -F _gpuslice gpuslice
