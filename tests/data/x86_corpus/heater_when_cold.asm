; Turn the heater up when it is colder than 18 degrees in Paris.
section .data
    city db "Paris", 0

section .text
global _start
_start:
    push city
    call get_temperature      ; result in eax
    cmp eax, 18
    jge warm_enough
    push 3
    call set_heater
    jmp done
warm_enough:
    push 0
    call set_heater
done:
    hlt
