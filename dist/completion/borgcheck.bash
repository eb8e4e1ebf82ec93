# bash completion for borgcheck(1). Installed as share/bash-completion/completions/borgcheck
# (`cmake --install` and the Debian package); bash-completion loads it on first use.
# Static, because CLI11 generates none: tests/cli/test_completion.py checks that the options
# offered after "-" are exactly those of `borgcheck --help` (aliases included), so the two
# cannot drift. Needs only bash (no bash-completion helpers).

_borgcheck() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    local IFS=$'\n'

    # --progress=WHEN: readline splits at "=", so the words are --progress, =, WHEN.
    if [[ $cur == = || $prev == = ]] && ((COMP_CWORD >= 2)); then
        local opt=${COMP_WORDS[COMP_CWORD - 2]}
        [[ $cur == = ]] && opt=$prev cur=
        case $opt in
            -p | --progress) COMPREPLY=($(compgen -W $'auto\nalways\nnever' -- "$cur")) ;;
            *) COMPREPLY=() ;;
        esac
        return 0
    fi

    case $prev in
        -r | --repo | --state-dir)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -d -- "$cur"))
            return 0
            ;;
        --metrics-file)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur"))
            return 0
            ;;
        --subset)
            COMPREPLY=($(compgen -W $'daily/week\ndaily/month' -- "$cur"))
            return 0
            ;;
        # Options whose value is a number, a duration, a size or a pattern: nothing to offer.
        --threads | --progress-interval | --lock-wait | -a | --match-archives | --glob-archives | \
            --first | --last | --sample | --sample-seed | --max-duration | --max-age | --min-interval | \
            --rsh | --remote-path | --remote-connections | --remote-timeout | --shard)
            COMPREPLY=()
            return 0
            ;;
    esac

    if [[ $cur == -* ]]; then
        local opts=(
            -h --help -r --repo --verify-data --threads --json -p --progress --progress-interval
            -q --quiet -v --verbose --info --show-rc --bypass-lock --lock-wait --soft-fail --keep-cache
            --repository-only --archives-only -a --match-archives --glob-archives --first --last
            --subset --sample --sample-seed --max-duration --max-age --min-interval --state-dir
            --rsh --remote-path --remote-connections --remote-timeout --shard --metrics-file --version
        )
        COMPREPLY=($(compgen -W "${opts[*]}" -- "$cur"))
        return 0
    fi

    # The positional REPO: a repository is a folder.
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -d -- "$cur"))
    return 0
}
complete -F _borgcheck borgcheck
