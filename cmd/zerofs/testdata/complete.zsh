# zsh -f complete.zsh SCRIPT OUT DIR LINE...: what zsh's completion offers
# for each LINE, completed at its end, in DIR with the completion script
# SCRIPT loaded. An interactive zsh on a pseudo-terminal (zpty) gets each
# LINE and a tab, then has its line cleared; a compadd in front of the
# builtin writes each match it adds to OUT, one a line, and the tab's
# widget "--done" when a completion has run.
zmodload zsh/zpty
script=$1 out=$2 dir=$3
shift 3
zpty z zsh -f -i
zpty -w z "PROMPT=; unsetopt auto_list auto_menu list_beep beep; cd ${(q)dir}; autoload -Uz compinit; compinit -u -D"
zpty -w z "compadd() { if (( \${@[(I)-[OAD]]} )); then builtin compadd \"\$@\"; return; fi; local -a m; builtin compadd -A m \"\$@\"; print -rl -- \$m >> ${(q)out}; builtin compadd \"\$@\"; }"
zpty -w z "complete_() { zle complete-word; print -r -- --done >> ${(q)out} }; zle -N complete_"
zpty -w z "source ${(q)script}; bindkey '^I' complete_; bindkey '^U' kill-whole-line"
integer n=0
for line; do
	(( n++ ))
	zpty -w -n z "$line"$'\t'
	for i in {1..300}; do
		[[ -f $out && ${#${(M)${(f)"$(<$out)"}:#--done}} -ge $n ]] && break
		sleep 0.05
	done
	zpty -w -n z $'\C-u'
done
zpty -d z
